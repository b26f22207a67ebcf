// Users (admins): create, enable / disable, reset a password. Passwords are typed, sent, never shown.
import { useState, type FormEvent } from "react";

import { useCreateUser, useUpdateUser, useUsers } from "../../api/admin";
import { ErrorBox, Loading } from "../../components/ErrorBox";
import { tUsers as t } from "./adminStrings";
import { useAction } from "./useAction";

function ResetPassword({ name, onDone }: { name: string; onDone: () => void }) {
  const [password, setPassword] = useState("");
  const { run, error, busy } = useAction(["users"]);
  const update = useUpdateUser();
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    const ok = await run(() => update.mutateAsync({ name, password }));
    if (ok) onDone();
  };
  return (
    <form className="inline-form" onSubmit={submit}>
      <input
        type="password"
        aria-label={t.newPassword(name)}
        autoComplete="new-password"
        value={password}
        onChange={(e) => setPassword(e.target.value)}
      />
      <button type="submit" disabled={busy || !password}>
        {t.setPassword}
      </button>
      <button type="button" onClick={onDone}>
        {t.cancel}
      </button>
      <ErrorBox error={error} title={t.notChanged} />
    </form>
  );
}

export function Users() {
  const list = useUsers();
  const creation = useCreateUser();
  const update = useUpdateUser();
  const { run, error, busy } = useAction(["users"]);
  const [name, setName] = useState("");
  const [password, setPassword] = useState("");
  const [admin, setAdmin] = useState(false);
  const [resetting, setResetting] = useState<string | null>(null);
  const create = async (e: FormEvent) => {
    e.preventDefault();
    const ok = await run(() => creation.mutateAsync({ name, password, admin }));
    if (ok) {
      setName("");
      setPassword("");
      setAdmin(false);
    }
  };
  const enable = (user: string, enabled: boolean) => run(() => update.mutateAsync({ name: user, enabled }));
  return (
    <div data-testid="admin-users">
      <h2>{t.title}</h2>
      <form className="toolbar" onSubmit={create} aria-label={t.newUser}>
        <input
          aria-label={t.nameLabel}
          placeholder={t.namePlaceholder}
          value={name}
          onChange={(e) => setName(e.target.value)}
        />
        <input
          type="password"
          aria-label={t.passwordLabel}
          placeholder={t.passwordPlaceholder}
          autoComplete="new-password"
          value={password}
          onChange={(e) => setPassword(e.target.value)}
        />
        <label>
          <input type="checkbox" checked={admin} onChange={(e) => setAdmin(e.target.checked)} /> {t.admin}
        </label>
        <button type="submit" disabled={busy || !name.trim() || !password}>
          {t.create}
        </button>
      </form>
      <ErrorBox error={error ?? list.error} title={t.errors} />
      {list.isPending && <Loading what={t.noun} />}
      <table className="grid">
        <thead>
          <tr>
            <th>{t.name}</th>
            <th>{t.role}</th>
            <th>{t.state}</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {list.data?.items.map((u) => (
            <tr key={u.name} data-testid={`user-${u.name}`}>
              <td>{u.name}</td>
              <td>{u.admin ? t.roleAdmin : t.roleUser}</td>
              <td>{u.enabled ? t.enabled : t.disabled}</td>
              <td>
                <button onClick={() => void enable(u.name as string, !u.enabled)}>
                  {u.enabled ? t.disable : t.enable}
                </button>{" "}
                {resetting === u.name ? (
                  <ResetPassword name={u.name as string} onDone={() => setResetting(null)} />
                ) : (
                  <button onClick={() => setResetting(u.name as string)}>{t.reset}</button>
                )}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
