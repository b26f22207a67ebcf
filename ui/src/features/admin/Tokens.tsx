// API tokens: create (the secret is shown once), revoke.
import { useState, type FormEvent } from "react";

import { useCreateToken, useRevokeToken, useTokens } from "../../api/admin";
import { ErrorBox, Loading } from "../../components/ErrorBox";
import { Time } from "../../components/Time";

export function Tokens() {
  const list = useTokens();
  const creation = useCreateToken();
  const revocation = useRevokeToken();
  const [name, setName] = useState("");
  const [created, setCreated] = useState<string | null>(null);
  const [error, setError] = useState<unknown>(null);
  const create = async (event: FormEvent) => {
    event.preventDefault();
    setError(null);
    try {
      const made = await creation.mutateAsync(name);
      setCreated(made.token ?? null);
      setName("");
    } catch (exc) {
      setError(exc);
    }
  };
  const revoke = async (id: number) => {
    setError(null);
    try {
      await revocation.mutateAsync(id);
    } catch (exc) {
      setError(exc);
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
