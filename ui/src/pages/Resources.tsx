// The resource center of a project: its folders (a breadcrumb and the sub-folders of the open one), its files
// with their versions (download any, restore one as a new version), the workflows that use a file, uploads with
// progress, and deletes (refused with the server's reason while a workflow uses the file or folder). The
// project, folder and open file are kept in the URL.
import { useQuery, useQueryClient } from "@tanstack/react-query";
import { useState, type FormEvent } from "react";
import { Link, useSearchParams } from "react-router";

import { api, authHeaders, baseUrl, call, errorOf, token } from "../api/client";
import { useResourceDetail, useResourceFolder } from "../api/queries";
import { ErrorBox } from "../components/ErrorBox";
import { Time } from "../components/Time";
import { errorAt } from "../features/admin/FormField";
import { contentPath, crumbs, formatBytes, joinPath, percent } from "../features/resources/paths";
import { t } from "../features/resources/strings";
import { uploadFile } from "../features/resources/upload";
import { tTitle } from "../components/strings";
import { useTitle } from "../components/title";

export function ResourcesPage() {
  useTitle(tTitle.resources);
  const [params, setParams] = useSearchParams();
  const project = params.get("project") ?? "";
  const folder = params.get("folder") ?? "";
  const open = params.get("file");
  const go = (next: { project?: string; folder?: string; file?: string | null }) => {
    const p = next.project ?? project;
    const f = next.folder ?? folder;
    const file = next.file === undefined ? open : next.file;
    setParams({ ...(p ? { project: p } : {}), ...(f ? { folder: f } : {}), ...(file ? { file } : {}) });
  };
  const projects = useQuery({
    queryKey: ["projects"],
    queryFn: () => call(api.GET("/api/v1/projects", { params: { query: { size: 200 } } })),
  });
  const listing = useResourceFolder(project, folder);
  const client = useQueryClient();
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const refresh = () => client.invalidateQueries({ queryKey: ["resources", project] });
  const remove = async (path: string) => {
    setBusy(true);
    setError(null);
    try {
      await call(
        api.DELETE("/api/v1/projects/{name}/resources", {
          params: { path: { name: project }, query: { path } },
        }),
      );
      if (open === path) go({ file: null });
    } catch (exc) {
      setError(exc);
    } finally {
      setBusy(false);
      void refresh();
    }
  };
  const data = listing.data;
  return (
    <section data-testid="resources">
      <h1>{t.title}</h1>
      <p className="muted">{t.intro}</p>
      <div className="toolbar">
        <label>
          {t.project}{" "}
          <select
            aria-label={t.project}
            value={project}
            onChange={(e) => setParams(e.target.value ? { project: e.target.value } : {})}
          >
            <option value="">{t.choose}</option>
            {projects.data?.items.map((p) => (
              <option key={p.name}>{p.name}</option>
            ))}
          </select>
        </label>
        {data?.usage !== undefined && data.limit !== undefined && (
          <span className="muted small" data-testid="resource-usage">
            {t.usage(formatBytes(data.usage), formatBytes(data.limit))}
          </span>
        )}
      </div>
      {!project && <p className="muted">{t.pickProject}</p>}
      <ErrorBox error={error ?? listing.error ?? projects.error} title={t.title} />
      {project && (
        <>
          <nav className="toolbar" aria-label={t.breadcrumbs} data-testid="resource-crumbs">
            <button
              className="link"
              aria-label={t.folderNav("")}
              onClick={() => go({ folder: "", file: null })}
            >
              {t.top}
            </button>
            {crumbs(folder).map((c) => (
              <span key={c.path}>
                /{" "}
                <button
                  className="link"
                  aria-label={t.folderNav(c.path)}
                  aria-current={c.path === folder ? "location" : undefined}
                  onClick={() => go({ folder: c.path, file: null })}
                >
                  {c.name}
                </button>
              </span>
            ))}
          </nav>
          <UploadForm
            key={`${project}/${folder}`}
            project={project}
            folder={folder}
            onUploaded={(path) => {
              void refresh();
              go({ file: path });
            }}
          />
          <table className="grid" data-testid="resource-listing">
            <thead>
              <tr>
                <th>{t.name}</th>
                <th>{t.size}</th>
                <th>{t.versions}</th>
                <th>{t.updated}</th>
                <th>{t.actions}</th>
              </tr>
            </thead>
            <tbody>
              {data && (data.folders ?? []).length + (data.files ?? []).length === 0 && (
                <tr>
                  <td colSpan={5} className="muted">
                    {t.empty}
                  </td>
                </tr>
              )}
              {(data?.folders ?? []).map((f) => (
                <tr key={f.path} data-testid={`resource-folder-${f.path}`}>
                  <td>
                    <button className="link" onClick={() => go({ folder: f.path ?? "", file: null })}>
                      {f.name}/
                    </button>
                  </td>
                  <td>{formatBytes(f.size)}</td>
                  <td className="muted">{t.files(f.files ?? 0)}</td>
                  <td />
                  <td>
                    <button
                      aria-label={t.removeFolder(f.path ?? "")}
                      disabled={busy}
                      onClick={() => void remove(f.path ?? "")}
                    >
                      {t.remove}
                    </button>
                  </td>
                </tr>
              ))}
              {(data?.files ?? []).map((f) => {
                const path = f.path ?? "";
                return (
                  <tr
                    key={path}
                    data-testid={`resource-file-${path}`}
                    className={open === path ? "selected" : undefined}
                  >
                    <td>
                      <button className="link" onClick={() => go({ file: path })}>
                        {f.name}
                      </button>
                    </td>
                    <td>{formatBytes(f.size)}</td>
                    <td>{f.versions}</td>
                    <td className="small">
                      <Time iso={f.create_time} />
                    </td>
                    <td>
                      <div className="toolbar">
                        <DownloadLink project={project} path={path} label={t.download} />
                        <button
                          aria-label={t.removeFile(path)}
                          disabled={busy}
                          onClick={() => void remove(path)}
                        >
                          {t.remove}
                        </button>
                      </div>
                    </td>
                  </tr>
                );
              })}
            </tbody>
          </table>
          {open && (
            <FileDetail
              key={open}
              project={project}
              path={open}
              onClose={() => go({ file: null })}
              onChanged={() => void refresh()}
            />
          )}
        </>
      )}
    </section>
  );
}

/** A download: with a session cookie a plain link (the browser streams it to disk); signed in with a token
 * (which a link does not send) the file is fetched into the page first. */
function DownloadLink({
  project,
  path,
  version,
  label,
}: {
  project: string;
  path: string;
  version?: number;
  label: string;
}) {
  const [error, setError] = useState<unknown>(null);
  const href = `${baseUrl()}${contentPath(project, path, version)}`;
  const filename = path.split("/").pop() ?? "download";
  if (token.get() === null)
    return (
      <a className="button" href={href} download={filename}>
        {label}
      </a>
    );
  const fetchIt = async () => {
    try {
      const response = await fetch(href, { headers: authHeaders() });
      if (!response.ok) throw errorOf(response.status, await response.json().catch(() => undefined));
      const url = URL.createObjectURL(await response.blob());
      const a = document.createElement("a");
      a.href = url;
      a.download = filename;
      a.click();
      URL.revokeObjectURL(url);
    } catch (exc) {
      setError(exc);
    }
  };
  return (
    <>
      <button onClick={() => void fetchIt()}>{label}</button>
      <ErrorBox error={error} title={label} />
    </>
  );
}

function UploadForm({
  project,
  folder,
  onUploaded,
}: {
  project: string;
  folder: string;
  onUploaded: (path: string) => void;
}) {
  const [file, setFile] = useState<File | null>(null);
  const [path, setPath] = useState("");
  const [note, setNote] = useState("");
  const [progress, setProgress] = useState<number | null>(null);
  const [done, setDone] = useState<string | null>(null);
  const [error, setError] = useState<unknown>(null);
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    if (!file) return;
    setError(null);
    setDone(null);
    setProgress(0);
    try {
      const stored = await uploadFile(project, path.trim(), file, note, (loaded, total) =>
        setProgress(percent(loaded, total)),
      );
      setDone(t.uploaded(stored.path ?? path, stored.version ?? 0));
      setFile(null);
      setNote("");
      onUploaded(stored.path ?? path);
    } catch (exc) {
      setError(exc);
      setProgress(null);
    }
  };
  const uploading = progress !== null && done === null && error === null;
  const pathError = errorAt(error, "query.path");
  return (
    <form className="admin-form" onSubmit={submit} aria-label={t.uploadTitle} data-testid="resource-upload">
      <h3>{t.uploadTitle}</h3>
      <div className="form-field">
        <label htmlFor="resource-file">{t.file}</label>
        <input
          id="resource-file"
          type="file"
          onChange={(e) => {
            const picked = e.target.files?.[0] ?? null;
            setFile(picked);
            setDone(null);
            setProgress(null);
            if (picked) setPath(joinPath(folder, picked.name));
          }}
        />
      </div>
      <div className={`form-field${pathError ? " invalid" : ""}`}>
        <label htmlFor="resource-path">{t.path}</label>
        <input
          id="resource-path"
          value={path}
          aria-invalid={Boolean(pathError)}
          aria-describedby={pathError ? "resource-path-error" : "resource-path-help"}
          onChange={(e) => setPath(e.target.value)}
        />
        {pathError ? (
          <div className="error-inline" id="resource-path-error" role="alert">
            {pathError}
          </div>
        ) : (
          <div className="muted small" id="resource-path-help">
            {t.pathHelp}
          </div>
        )}
      </div>
      <div className="form-field">
        <label htmlFor="resource-note">{t.description}</label>
        <input id="resource-note" value={note} onChange={(e) => setNote(e.target.value)} />
      </div>
      <div className="toolbar">
        <button type="submit" disabled={!file || !path.trim() || uploading}>
          {t.upload}
        </button>
        {progress !== null && <progress aria-label={t.progress} max={100} value={progress} />}
        <span role="status" data-testid="upload-status">
          {uploading ? t.uploading(progress ?? 0) : (done ?? "")}
        </span>
      </div>
      {error !== null && !pathError && <ErrorBox error={error} title={t.upload} />}
    </form>
  );
}

function FileDetail({
  project,
  path,
  onClose,
  onChanged,
}: {
  project: string;
  path: string;
  onClose: () => void;
  onChanged: () => void;
}) {
  const { versions, references } = useResourceDetail(project, path);
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const restore = async (version: number) => {
    setBusy(true);
    setError(null);
    try {
      await call(
        api.POST("/api/v1/projects/{name}/resources/restore", {
          params: { path: { name: project } },
          body: { path, version },
        }),
      );
      onChanged();
    } catch (exc) {
      setError(exc);
    } finally {
      setBusy(false);
    }
  };
  const refs = references.data?.references ?? [];
  return (
    <section className="panel" aria-label={t.detailsOf(path)} data-testid="resource-detail">
      <div className="toolbar">
        <h2>{t.detailsOf(path)}</h2>
        <button onClick={onClose}>{t.close}</button>
      </div>
      <ErrorBox error={error ?? versions.error ?? references.error} title={t.detailsOf(path)} />
      <h3>{t.versions}</h3>
      <table className="grid" data-testid="resource-versions">
        <thead>
          <tr>
            <th>{t.version}</th>
            <th>{t.size}</th>
            <th>{t.checksum}</th>
            <th>{t.created}</th>
            <th>{t.note}</th>
            <th>{t.actions}</th>
          </tr>
        </thead>
        <tbody>
          {(versions.data?.versions ?? []).map((v, i) => {
            const n = v.version ?? 0;
            return (
              <tr key={n} data-testid={`resource-version-${n}`}>
                <td>{n}</td>
                <td>{formatBytes(v.size)}</td>
                <td>
                  <code title={v.sha256}>{v.sha256?.slice(0, 12)}</code>
                </td>
                <td className="small">
                  <Time iso={v.create_time} />
                </td>
                <td>
                  {v.description}
                  {v.restored_from ? (
                    <span className="muted small"> {t.restored(v.restored_from)}</span>
                  ) : null}
                </td>
                <td>
                  <div className="toolbar">
                    <DownloadLink project={project} path={path} version={n} label={t.downloadVersion(n)} />
                    {i > 0 && (
                      <button disabled={busy} onClick={() => void restore(n)}>
                        {t.restoreVersion(n)}
                      </button>
                    )}
                  </div>
                </td>
              </tr>
            );
          })}
        </tbody>
      </table>
      <h3>{t.references}</h3>
      {references.isSuccess && refs.length === 0 && <p className="muted">{t.noReferences}</p>}
      <ul data-testid="resource-references">
        {refs.map((r, i) => (
          <li key={i}>
            <Link to={`/workflows/${r.code}`}>
              {t.refLine(
                r.workflow ?? "",
                r.workflow_version ?? 0,
                r.task ?? null,
                t.pinned(r.version ?? "latest"),
              )}
            </Link>
          </li>
        ))}
      </ul>
    </section>
  );
}
