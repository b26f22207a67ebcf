// Environments (DolphinScheduler's "environment": shell exports a task runs before its own script, meant for
// worker groups): create, edit, delete (refused with the server's reason while a workflow names it), grant to
// projects or users. The server's refusals of a field show at the field.
import { useQuery, useQueryClient } from "@tanstack/react-query";
import { useState, type FormEvent } from "react";

import { api, call } from "../../api/client";
import { ErrorBox } from "../../components/ErrorBox";
import { errorAt, FormField, isFieldError } from "./FormField";
import { GrantsCell, useResourceGrants } from "./ResourceGrants";
import { common, tEnvironments as t } from "./strings";
import { useAction } from "./useAction";

export interface StoredEnvironment {
  name?: string;
  config?: string;
  description?: string | null;
  worker_groups?: string[];
}

export interface EnvironmentForm {
  name: string;
  config: string;
  description: string;
  groups: string[];
}

const FIELDS = ["name", "path.name", "config", "description", "worker_groups"];

/** The POST body of a new environment. */
export function newEnvironmentBody(form: EnvironmentForm) {
  return {
    name: form.name.trim(),
    config: form.config,
    worker_groups: form.groups,
    ...(form.description.trim() ? { description: form.description } : {}),
  };
}

/** The PATCH body of an edit: what changed (null: nothing did). */
export function environmentChanges(form: EnvironmentForm, stored: StoredEnvironment) {
  const changes: { config?: string; description?: string; worker_groups?: string[] } = {};
  if (form.config !== (stored.config ?? "")) changes.config = form.config;
  if (form.description !== (stored.description ?? "")) changes.description = form.description;
  const before = [...(stored.worker_groups ?? [])].sort();
  if (JSON.stringify([...form.groups].sort()) !== JSON.stringify(before)) changes.worker_groups = form.groups;
  return Object.keys(changes).length ? changes : null;
}

export function Environments() {
  const list = useQuery({
    queryKey: ["environments"],
    queryFn: () => call(api.GET("/api/v1/environments", { params: { query: { size: 500 } } })),
  });
  const groups = useQuery({
    queryKey: ["worker-groups"],
    queryFn: () => call(api.GET("/api/v1/worker-groups", { params: { query: { size: 500 } } })),
  });
  const access = useResourceGrants("environment");
  const client = useQueryClient();
  const grants = useAction(["environment"]);
  const removal = useAction(["environments"]);
  const [editing, setEditing] = useState<StoredEnvironment | null>(null);
  const [creating, setCreating] = useState(false);
  const groupNames = (groups.data?.items ?? []).flatMap((g) => (g.name ? [g.name] : []));
  const remove = (name: string) =>
    removal.run(() => call(api.DELETE("/api/v1/environments/{name}", { params: { path: { name } } })));

  return (
    <div data-testid="admin-environments">
      <h2>{t.title}</h2>
      <p className="muted">{t.intro}</p>
      <button
        onClick={() => {
          setEditing(null);
          setCreating(true);
        }}
      >
        {t.add}
      </button>
      {(creating || editing) && (
        <EnvironmentEditor
          key={editing?.name ?? ""}
          stored={editing}
          groups={groupNames}
          onDone={() => {
            setCreating(false);
            setEditing(null);
            void client.invalidateQueries({ queryKey: ["environments"] });
          }}
        />
      )}
      <ErrorBox error={removal.error ?? grants.error ?? list.error ?? access.error} title={t.title} />
      <table className="grid">
        <thead>
          <tr>
            <th>{common.name}</th>
            <th>{t.config}</th>
            <th>{t.groups}</th>
            <th>{t.projects}</th>
            <th>{common.actions}</th>
          </tr>
        </thead>
        <tbody>
          {list.data?.items.map((e) => {
            const name = e.name ?? "";
            return (
              <tr key={name} data-testid={`environment-${name}`}>
                <td>
                  {name}
                  {e.description && <div className="muted small">{e.description}</div>}
                </td>
                <td>
                  <pre className="small">{e.config}</pre>
                </td>
                <td>{(e.worker_groups ?? []).join(", ") || common.none}</td>
                <td>
                  <GrantsCell
                    resource={name}
                    grants={access.grants.filter((g) => g.resource === name)}
                    projects={access.projects}
                    busy={grants.busy}
                    onGrant={(to) => void grants.run(() => access.grant(name, to))}
                    onRevoke={(id) => void grants.run(() => access.revoke(id))}
                  />
                </td>
                <td>
                  <div className="toolbar">
                    <button
                      onClick={() => {
                        setCreating(false);
                        setEditing(e);
                      }}
                    >
                      {common.edit}
                    </button>
                    <button disabled={removal.busy} onClick={() => void remove(name)}>
                      {common.remove}
                    </button>
                  </div>
                </td>
              </tr>
            );
          })}
        </tbody>
      </table>
    </div>
  );
}

export function EnvironmentEditor({
  stored,
  groups,
  onDone,
}: {
  stored: StoredEnvironment | null;
  /** worker groups to choose from */
  groups: readonly string[];
  onDone: () => void;
}) {
  const [form, setForm] = useState<EnvironmentForm>(() => ({
    name: stored?.name ?? "",
    config: stored?.config ?? "",
    description: stored?.description ?? "",
    groups: stored?.worker_groups ?? [],
  }));
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const at = (field: string) => errorAt(error, field);
  const title = stored ? t.editTitle(stored.name ?? "") : t.newTitle;
  const offered = [...new Set([...groups, ...form.groups])].sort();
  const save = async (e: FormEvent) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      if (!stored) {
        await call(api.POST("/api/v1/environments", { body: newEnvironmentBody(form) }));
      } else {
        const body = environmentChanges(form, stored);
        if (body)
          await call(
            api.PATCH("/api/v1/environments/{name}", { params: { path: { name: stored.name ?? "" } }, body }),
          );
      }
      onDone();
    } catch (exc) {
      setError(exc);
    } finally {
      setBusy(false);
    }
  };
  return (
    <form className="admin-form" onSubmit={save} aria-label={title} data-testid="environment-form">
      <h3>{title}</h3>
      <FormField label={t.name} error={at("name") ?? at("path.name")}>
        {(props) => (
          <input
            {...props}
            value={form.name}
            disabled={stored !== null}
            onChange={(e) => setForm({ ...form, name: e.target.value })}
          />
        )}
      </FormField>
      <FormField label={t.config} error={at("config")}>
        {(props) => (
          <textarea
            {...props}
            rows={4}
            spellCheck={false}
            placeholder="export JAVA_HOME=/opt/java"
            value={form.config}
            onChange={(e) => setForm({ ...form, config: e.target.value })}
          />
        )}
      </FormField>
      <FormField label={t.description} error={at("description")}>
        {(props) => (
          <input
            {...props}
            value={form.description}
            onChange={(e) => setForm({ ...form, description: e.target.value })}
          />
        )}
      </FormField>
      <fieldset className={at("worker_groups") ? "invalid" : undefined}>
        <legend>{t.workerGroups}</legend>
        <div className="muted small">{t.workerGroupsHelp}</div>
        {offered.map((g) => (
          <label key={g}>
            <input
              type="checkbox"
              checked={form.groups.includes(g)}
              onChange={(e) =>
                setForm({
                  ...form,
                  groups: e.target.checked ? [...form.groups, g] : form.groups.filter((x) => x !== g),
                })
              }
            />{" "}
            {g}
          </label>
        ))}
        {at("worker_groups") && (
          <div className="error-inline" role="alert">
            {at("worker_groups")}
          </div>
        )}
      </fieldset>
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
