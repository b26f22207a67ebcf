// API tokens: create (the secret is shown once), revoke.
import { useState, type FormEvent } from "react";

import { useCreateToken, useRevokeToken, useTokens } from "../../api/admin";
import { ErrorBox, Loading } from "../../components/ErrorBox";
import { Time } from "../../components/Time";
import { tTokens as t } from "./adminStrings";

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
      <h2>{t.title}</h2>
      <form className="toolbar" onSubmit={create}>
        <input
          aria-label={t.nameLabel}
          placeholder={t.namePlaceholder}
          value={name}
          onChange={(e) => setName(e.target.value)}
        />
        <button type="submit" disabled={!name.trim()}>
          {t.create}
        </button>
      </form>
      {created && (
        <div className="notice" role="status">
          {t.created}
          <code>{created}</code>
        </div>
      )}
      <ErrorBox error={error ?? list.error} title={t.errors} />
      {list.isPending && <Loading what={t.noun} />}
      <table className="grid">
        <thead>
          <tr>
            <th>{t.id}</th>
            <th>{t.name}</th>
            <th>{t.expires}</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {list.data?.items.map((token) => (
            <tr key={String(token.id)}>
              <td>{token.id}</td>
              <td>{token.name}</td>
              <td>{token.expire_time ? <Time iso={token.expire_time} /> : t.never}</td>
              <td>
                <button onClick={() => void revoke(token.id as number)}>{t.revoke}</button>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
