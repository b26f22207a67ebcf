// Project parameters (DolphinScheduler 3.2): name -> value for every task of a project. Secret ones are sealed
// at rest and listed as "***"; an edit that leaves a secret's value empty sends the mask back, which keeps the
// stored value. The server's refusals of a field show at the field.
import { useState, type FormEvent } from "react";

import { useDeleteProjectParam, useProjectParams, useProjects, useSaveProjectParam } from "../../api/admin";
import { ErrorBox } from "../../components/ErrorBox";
import { Time } from "../../components/Time";
import { MASK } from "./dataSourceForm";
import { errorAt, FormField, isFieldError } from "./FormField";
import { common, tProjectParams as t } from "./strings";
import { useAction } from "./useAction";

export interface StoredParam {
  name?: string;
  value?: string;
  secret?: boolean;
  update_time?: string;
}

export interface ParamForm {
  name: string;
  value: string;
  secret: boolean;
}

const FIELDS = ["path.param", "value", "secret"];

/** The form of a stored parameter (a secret's value empty: kept unless typed again). */
export function paramFormOf(stored: StoredParam | null): ParamForm {
  if (!stored) return { name: "", value: "", secret: false };
  return {
    name: stored.name ?? "",
    value: stored.secret ? "" : (stored.value ?? ""),
    secret: Boolean(stored.secret),
  };
}

/** The PUT body: a stored secret left empty is sent as the mask (kept); a secret is never sent as plain. */
export function paramBody(form: ParamForm, stored: StoredParam | null): { value: string; secret: boolean } {
  const keep = form.secret && form.value === "" && Boolean(stored?.secret);
  return { value: keep ? MASK : form.value, secret: form.secret };
}

export function ProjectParams() {
  const projects = useProjects();
  const [project, setProject] = useState("");
  const list = useProjectParams(project);
  const deletion = useDeleteProjectParam(project);
  const removal = useAction(["project-params", project]);
  const [editing, setEditing] = useState<StoredParam | null>(null);
  const [creating, setCreating] = useState(false);
  const remove = (param: string) => removal.run(() => deletion.mutateAsync(param));
  const items = list.data?.items ?? [];
  return (
    <div data-testid="admin-project-params">
      <h2>{t.title}</h2>
      <p className="muted">{t.intro}</p>
      <div className="toolbar">
        <label>
          {t.project}{" "}
          <select
            aria-label={t.project}
            value={project}
            onChange={(e) => {
              setProject(e.target.value);
              setEditing(null);
              setCreating(false);
            }}
          >
            <option value="">{t.choose}</option>
            {projects.data?.items.map((p) => (
              <option key={p.name}>{p.name}</option>
            ))}
          </select>
        </label>
        <button
          disabled={!project}
          onClick={() => {
            setEditing(null);
            setCreating(true);
          }}
        >
          {t.add}
        </button>
      </div>
      {project && (creating || editing) && (
        <ParamEditor
          key={`${project}/${editing?.name ?? ""}`}
          project={project}
          stored={editing}
          onDone={() => {
            setCreating(false);
            setEditing(null);
          }}
        />
      )}
      <ErrorBox error={removal.error ?? list.error ?? projects.error} title={t.title} />
      {project && (
        <table className="grid">
          <thead>
            <tr>
              <th>{common.name}</th>
              <th>{t.value}</th>
              <th>{t.updated}</th>
              <th>{common.actions}</th>
            </tr>
          </thead>
          <tbody>
            {list.isSuccess && items.length === 0 && (
              <tr>
                <td colSpan={4} className="muted">
                  {t.empty}
                </td>
              </tr>
            )}
            {items.map((p) => (
              <tr key={p.name} data-testid={`param-${p.name}`}>
                <td>
                  {p.name} {p.secret && <span className="badge">{t.secretYes}</span>}
                </td>
                <td>
                  <code>{p.value}</code>
                </td>
                <td className="small">
                  <Time iso={p.update_time} />
                </td>
                <td>
                  <div className="toolbar">
                    <button
                      onClick={() => {
                        setCreating(false);
                        setEditing(p);
                      }}
                    >
                      {common.edit}
                    </button>
                    <button disabled={removal.busy} onClick={() => void remove(p.name ?? "")}>
                      {common.remove}
                    </button>
                  </div>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </div>
  );
}

export function ParamEditor({
  project,
  stored,
  onDone,
}: {
  project: string;
  stored: StoredParam | null;
  onDone: () => void;
}) {
  const [form, setForm] = useState<ParamForm>(() => paramFormOf(stored));
  const saving = useSaveProjectParam(project);
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const at = (field: string) => errorAt(error, field);
  const title = stored ? t.editTitle(stored.name ?? "") : t.newTitle;
  const save = async (e: FormEvent) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      await saving.mutateAsync({ param: form.name.trim(), body: paramBody(form, stored) });
      onDone();
    } catch (exc) {
      setError(exc);
    } finally {
      setBusy(false);
    }
  };
  return (
    <form className="admin-form" onSubmit={save} aria-label={title} data-testid="param-form">
      <h3>{title}</h3>
      <FormField label={t.name} error={at("path.param")}>
        {(props) => (
          <input
            {...props}
            value={form.name}
            disabled={stored !== null}
            onChange={(e) => setForm({ ...form, name: e.target.value })}
          />
        )}
      </FormField>
      <FormField
        label={t.value}
        error={at("value")}
        help={stored?.secret && form.secret ? t.valueKept : undefined}
      >
        {(props) => (
          <input
            {...props}
            type={form.secret ? "password" : "text"}
            autoComplete={form.secret ? "new-password" : "off"}
            value={form.value}
            onChange={(e) => setForm({ ...form, value: e.target.value })}
          />
        )}
      </FormField>
      <label>
        <input
          type="checkbox"
          checked={form.secret}
          onChange={(e) => setForm({ ...form, secret: e.target.checked })}
        />{" "}
        {t.secret}
      </label>
      {error !== null && !isFieldError(error, FIELDS) && <ErrorBox error={error} title={title} />}
      <div className="toolbar">
        <button type="submit" disabled={busy || !form.name.trim()}>
          {common.save}
        </button>
        <button type="button" onClick={onDone}>
          {common.cancel}
        </button>
      </div>
    </form>
  );
}
