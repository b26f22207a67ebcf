// API tokens: create (the secret is shown once), revoke.
import { useQuery, useQueryClient } from "@tanstack/react-query";
import { useState, type FormEvent } from "react";

import { api, call } from "../../api/client";
import { ErrorBox, Loading } from "../../components/ErrorBox";
import { Time } from "../../components/Time";

export function Tokens() {
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
              <td>{t.expire_time ? <Time iso={t.expire_time} /> : "never"}</td>
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
