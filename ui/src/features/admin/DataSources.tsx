// Data sources (PostgreSQL for SQL tasks): create or edit. The password is never shown: the list masks it,
// and an edit that leaves it empty sends the mask back, which keeps the stored one.
import { useQuery } from "@tanstack/react-query";
import { useState, type FormEvent } from "react";

import { api, call } from "../../api/client";
import { ErrorBox } from "../../components/ErrorBox";
import { useAction } from "./useAction";

const MASK = "***";
interface Fields {
  name: string;
  host: string;
  port: string;
  database: string;
  user: string;
  password: string;
}
const EMPTY: Fields = { name: "", host: "127.0.0.1", port: "5432", database: "", user: "", password: "" };

/** The PUT body of the form (an empty password of an existing source: keep the stored one). */
export function sourceBody(f: Fields, editing: boolean) {
  return {
    params: {
      host: f.host,
      port: Number(f.port),
      database: f.database,
      user: f.user,
      password: f.password || (editing ? MASK : ""),
    },
  };
}

export function DataSources() {
  const list = useQuery({
    queryKey: ["datasources"],
    queryFn: () => call(api.GET("/api/v1/datasources", { params: { query: { size: 200 } } })),
  });
  const { run, error, busy } = useAction(["datasources"]);
  const [form, setForm] = useState<Fields | null>(null);
  const [editing, setEditing] = useState(false);
  const set = (k: keyof Fields) => (e: { target: { value: string } }) =>
    setForm((f) => (f ? { ...f, [k]: e.target.value } : f));
  const save = async (e: FormEvent) => {
    e.preventDefault();
    if (!form) return;
    const ok = await run(() =>
      call(
        api.PUT("/api/v1/datasources/{name}", {
          params: { path: { name: form.name } },
          body: sourceBody(form, editing),
        }),
      ),
    );
    if (ok) setForm(null);
  };
  const edit = (d: { name?: string; params?: Record<string, unknown> }) => {
    const p = d.params ?? {};
    setEditing(true);
    setForm({
      name: d.name ?? "",
      host: String(p.host ?? ""),
      port: String(p.port ?? 5432),
      database: String(p.database ?? ""),
      user: String(p.user ?? ""),
      password: "",
    });
  };
  return (
    <div data-testid="admin-datasources">
      <h2>Data sources</h2>
      <button
        onClick={() => {
          setEditing(false);
          setForm(EMPTY);
        }}
      >
        New data source
      </button>
      {form && (
        <form className="toolbar wrap" onSubmit={save} aria-label="Data source">
          {(["name", "host", "port", "database", "user"] as const).map((k) => (
            <label key={k}>
              {k} <input value={form[k]} onChange={set(k)} disabled={k === "name" && editing} />
            </label>
          ))}
          <label>
            password{" "}
            <input
              type="password"
              autoComplete="new-password"
              placeholder={editing ? "unchanged" : ""}
              value={form.password}
              onChange={set("password")}
            />
          </label>
          <button type="submit" disabled={busy || !form.name.trim()}>
            Save
          </button>
          <button type="button" onClick={() => setForm(null)}>
            Cancel
          </button>
        </form>
      )}
      <ErrorBox error={error ?? list.error} title="Data sources" />
      <table className="grid">
        <thead>
          <tr>
            <th>Name</th>
            <th>Type</th>
            <th>Settings (secrets masked)</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {list.data?.items.map((d) => (
            <tr key={d.name} data-testid={`datasource-${d.name}`}>
              <td>{d.name}</td>
              <td>{d.type}</td>
              <td>
                <code>{JSON.stringify(d.params)}</code>
              </td>
              <td>
                <button onClick={() => edit(d)}>Edit</button>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
