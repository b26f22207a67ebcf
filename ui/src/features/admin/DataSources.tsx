// Data sources of SQL and PROCEDURE tasks by type (POSTGRESQL, MYSQL, HIVE, CLICKHOUSE): create or edit (the
// type sets the default port and its fields), test the connection (the server's version or its error), grant
// to projects or users, delete. Passwords are never shown; an edit that leaves one empty keeps the stored one.
// The server's refusals of a field show at the field.
import { useQuery, useQueryClient } from "@tanstack/react-query";
import { useState, type FormEvent } from "react";

import { api, ApiError, call } from "../../api/client";
import { ErrorBox } from "../../components/ErrorBox";
import {
  DEFAULTS,
  DEFAULT_PORTS,
  emptyForm,
  formOf,
  isSourceType,
  SOURCE_TYPES,
  sourceBody,
  storedSecrets,
  withType,
  type SourceForm,
} from "./dataSourceForm";
import { errorAt, FormField, isFieldError } from "./FormField";
import { GrantsCell, useResourceGrants } from "./ResourceGrants";
import { common, tDataSources as t } from "./strings";
import { useAction } from "./useAction";

interface Listed {
  name?: string;
  type?: string;
  params?: Record<string, unknown>;
  note?: unknown;
}
type Tested = { ok?: boolean; version?: string; error?: string; seconds?: number };

/** The fields the form shows a refusal at (any other error goes to its error box). */
const FIELDS = ["path.name", "type", "note"].concat(
  ["host", "port", "database", "dsn", "user", "password", "other"].map((k) => `params.${k}`),
);

export function DataSources() {
  const list = useQuery({
    queryKey: ["datasources"],
    queryFn: () => call(api.GET("/api/v1/datasources", { params: { query: { size: 200 } } })),
  });
  const access = useResourceGrants("datasource");
  const client = useQueryClient();
  const { run, error, busy } = useAction(["datasource"]);
  const refresh = useAction(["datasources"]);
  const [editing, setEditing] = useState<Listed | null>(null);
  const [creating, setCreating] = useState(false);
  const [tests, setTests] = useState<Record<string, Tested | "running">>({});

  const test = async (name: string) => {
    setTests((s) => ({ ...s, [name]: "running" }));
    try {
      const answer = await call(
        api.POST("/api/v1/datasources/{name}/test", { params: { path: { name } }, body: {} }),
      );
      setTests((s) => ({ ...s, [name]: answer }));
    } catch (exc) {
      setTests((s) => ({ ...s, [name]: { ok: false, error: (exc as Error).message } }));
    }
  };
  const remove = (name: string) =>
    refresh.run(() => call(api.DELETE("/api/v1/datasources/{name}", { params: { path: { name } } })));

  return (
    <div data-testid="admin-datasources">
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
        <SourceEditor
          key={editing?.name ?? ""}
          stored={editing}
          onDone={() => {
            setCreating(false);
            setEditing(null);
            void client.invalidateQueries({ queryKey: ["datasources"] });
          }}
        />
      )}
      <ErrorBox error={refresh.error ?? error ?? list.error ?? access.error} title={t.title} />
      <table className="grid">
        <thead>
          <tr>
            <th>{common.name}</th>
            <th>{t.type}</th>
            <th>{t.settings}</th>
            <th>{t.grants}</th>
            <th>{common.actions}</th>
          </tr>
        </thead>
        <tbody>
          {list.data?.items.map((d: Listed) => {
            const name = d.name ?? "";
            const tested = tests[name];
            return (
              <tr key={name} data-testid={`datasource-${name}`}>
                <td>{name}</td>
                <td>{d.type}</td>
                <td>
                  <code>{JSON.stringify(d.params)}</code>
                </td>
                <td>
                  <GrantsCell
                    resource={name}
                    grants={access.grants.filter((g) => g.resource === name)}
                    projects={access.projects}
                    busy={busy}
                    onGrant={(to) => void run(() => access.grant(name, to))}
                    onRevoke={(id) => void run(() => access.revoke(id))}
                  />
                </td>
                <td>
                  <div className="toolbar">
                    <button
                      onClick={() => {
                        setCreating(false);
                        setEditing(d);
                      }}
                    >
                      {common.edit}
                    </button>
                    <button disabled={tested === "running"} onClick={() => void test(name)}>
                      {t.test}
                    </button>
                    <button disabled={refresh.busy} onClick={() => void remove(name)}>
                      {common.remove}
                    </button>
                  </div>
                  {tested && (
                    <div
                      role="status"
                      data-testid={`test-result-${name}`}
                      className={tested !== "running" && !tested.ok ? "error-inline" : "small"}
                    >
                      {tested === "running"
                        ? t.testing
                        : tested.ok
                          ? t.testOk(tested.version ?? "", tested.seconds ?? 0)
                          : t.testFailed(tested.error ?? "")}
                    </div>
                  )}
                </td>
              </tr>
            );
          })}
        </tbody>
      </table>
    </div>
  );
}

/** The create / edit form of one source. */
export function SourceEditor({ stored, onDone }: { stored: Listed | null; onDone: () => void }) {
  const [form, setForm] = useState<SourceForm>(() => (stored ? formOf(stored) : emptyForm()));
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const secrets = stored ? storedSecrets(stored.params) : null;
  const set = (k: keyof SourceForm) => (e: { target: { value: string } }) =>
    setForm((f) => ({ ...f, [k]: e.target.value }));
  const at = (field: string) => errorAt(error, field);
  const save = async (e: FormEvent) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const body = sourceBody(form, secrets);
      await call(
        api.PUT("/api/v1/datasources/{name}", { params: { path: { name: form.name.trim() } }, body }),
      );
      onDone();
    } catch (exc) {
      setError(exc);
    } finally {
      setBusy(false);
    }
  };
  const defaults = DEFAULTS[form.type];
  const byDsn = form.type === "POSTGRESQL" && (form.dsn !== "" || Boolean(secrets?.dsn));
  const title = stored ? t.editTitle(stored.name ?? "") : t.newTitle;
  const text = (
    k: keyof SourceForm,
    label: string,
    field: string,
    extra: { placeholder?: string; help?: string } = {},
  ) => (
    <FormField label={label} error={at(field)} help={extra.help}>
      {(props) => <input {...props} value={form[k]} placeholder={extra.placeholder} onChange={set(k)} />}
    </FormField>
  );
  return (
    <form className="admin-form" onSubmit={save} aria-label={title} data-testid="datasource-form">
      <h3>{title}</h3>
      <FormField label={t.name} error={at("path.name")}>
        {(props) => <input {...props} value={form.name} disabled={stored !== null} onChange={set("name")} />}
      </FormField>
      <FormField label={t.type} error={at("type")}>
        {(props) => (
          <select
            {...props}
            value={form.type}
            onChange={(e) =>
              isSourceType(e.target.value) && setForm((f) => withType(f, e.target.value as typeof f.type))
            }
          >
            {SOURCE_TYPES.map((k) => (
              <option key={k}>{k}</option>
            ))}
          </select>
        )}
      </FormField>
      {!byDsn && (
        <>
          {text("host", t.host, "params.host")}
          {text("port", t.port, "params.port", { placeholder: String(DEFAULT_PORTS[form.type]) })}
          {text("database", t.database, "params.database", { placeholder: defaults.database })}
        </>
      )}
      {form.type === "POSTGRESQL" && (
        <FormField label={t.dsn} error={at("params.dsn")} help={secrets?.dsn ? t.dsnKept : t.dsnHelp}>
          {(props) => (
            <input {...props} type="password" autoComplete="off" value={form.dsn} onChange={set("dsn")} />
          )}
        </FormField>
      )}
      {text("user", t.user, "params.user", { placeholder: defaults.user })}
      <FormField
        label={t.password}
        error={at("params.password")}
        help={secrets?.password ? t.passwordKept : undefined}
      >
        {(props) => (
          <input
            {...props}
            type="password"
            autoComplete="new-password"
            value={form.password}
            onChange={set("password")}
          />
        )}
      </FormField>
      <FormField label={t.other} error={at("params.other")} help={t.otherHelp(form.type)}>
        {(props) => (
          <textarea {...props} rows={2} spellCheck={false} value={form.other} onChange={set("other")} />
        )}
      </FormField>
      {text("note", t.note, "note")}
      {error !== null && !isFieldError(error, FIELDS) && (
        <ErrorBox error={error instanceof ApiError ? error : new ApiError(0, String(error))} title={title} />
      )}
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
