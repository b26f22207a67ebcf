// Admin: API tokens (create shows the secret once, revoke), data sources and alert groups (read; their
// editing stays in the CLI and API for now).
import { useQuery, useQueryClient } from "@tanstack/react-query";
import { useState, type FormEvent } from "react";

import { api, call } from "../api/client";
import { ErrorBox, Loading } from "../components/ErrorBox";
import { formatTime } from "../components/time";

function Tokens() {
  const client = useQueryClient();
  const list = useQuery({
    queryKey: ["tokens"],
    queryFn: () => call(api.GET("/api/v1/tokens", { params: { query: { size: 200 } } })),
  });
  const [name, setName] = useState("");
  const [created, setCreated] = useState<string | null>(null);
  const [error, setError] = useState<unknown>(null);
  const create = async (event: FormEvent) => {
    event.preventDefault();
    setError(null);
    try {
      const made = await call(api.POST("/api/v1/tokens", { body: { name } }));
      setCreated(made.token ?? null);
      setName("");
    } catch (exc) {
      setError(exc);
    } finally {
      void client.invalidateQueries({ queryKey: ["tokens"] });
    }
  };
  const revoke = async (id: number) => {
    setError(null);
    try {
      await call(api.DELETE("/api/v1/tokens/{id}", { params: { path: { id: String(id) } } }));
    } catch (exc) {
      setError(exc);
    } finally {
      void client.invalidateQueries({ queryKey: ["tokens"] });
    }
  };
  return (
    <div>
      <h2>API tokens</h2>
      <form className="toolbar" onSubmit={create}>
        <input
          aria-label="New token name"
          placeholder="name"
          value={name}
          onChange={(e) => setName(e.target.value)}
        />
        <button type="submit" disabled={!name.trim()}>
          Create token
        </button>
      </form>
      {created && (
        <div className="notice" role="status">
          New token (shown only now): <code>{created}</code>
        </div>
      )}
      <ErrorBox error={error ?? list.error} title="Tokens" />
      {list.isPending && <Loading what="tokens" />}
      <table className="grid">
        <thead>
          <tr>
            <th>Id</th>
            <th>Name</th>
            <th>Expires</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {list.data?.items.map((t) => (
            <tr key={String(t.id)}>
              <td>{t.id}</td>
              <td>{t.name}</td>
              <td>{t.expire_time ? formatTime(t.expire_time) : "never"}</td>
              <td>
                <button onClick={() => void revoke(t.id as number)}>Revoke</button>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

function DataSources() {
  const list = useQuery({
    queryKey: ["datasources"],
    queryFn: () => call(api.GET("/api/v1/datasources", { params: { query: { size: 200 } } })),
  });
  return (
    <div>
      <h2>Data sources</h2>
      <ErrorBox error={list.error} title="Data sources" />
      <table className="grid">
        <thead>
          <tr>
            <th>Name</th>
            <th>Type</th>
            <th>Settings (secrets masked)</th>
          </tr>
        </thead>
        <tbody>
          {list.data?.items.map((d) => (
            <tr key={d.name}>
              <td>{d.name}</td>
              <td>{d.type}</td>
              <td>
                <code>{JSON.stringify(d.params)}</code>
              </td>
            </tr>
          ))}
          {list.data?.items.length === 0 && (
            <tr>
              <td colSpan={3} className="muted">
                none
              </td>
            </tr>
          )}
        </tbody>
      </table>
    </div>
  );
}

function AlertGroups() {
  const list = useQuery({
    queryKey: ["alert-groups"],
    queryFn: () => call(api.GET("/api/v1/alert-groups", { params: { query: { size: 200 } } })),
  });
  return (
    <div>
      <h2>Alert groups</h2>
      <ErrorBox error={list.error} title="Alert groups" />
      <table className="grid">
        <thead>
          <tr>
            <th>Id</th>
            <th>Name</th>
            <th>Senders</th>
          </tr>
        </thead>
        <tbody>
          {list.data?.items.map((g) => (
            <tr key={String(g.id)}>
              <td>{g.id}</td>
              <td>{g.name}</td>
              <td>{g.senders?.map((s) => `${s.name} (${s.type})`).join(", ")}</td>
            </tr>
          ))}
          {list.data?.items.length === 0 && (
            <tr>
              <td colSpan={3} className="muted">
                none
              </td>
            </tr>
          )}
        </tbody>
      </table>
    </div>
  );
}

export function AdminPage() {
  return (
    <section>
      <h1>Admin</h1>
      <Tokens />
      <DataSources />
      <AlertGroups />
    </section>
  );
}
