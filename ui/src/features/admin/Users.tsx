// Users (admins): create, enable / disable, reset a password. Passwords are typed, sent, never shown.
import { useState, type FormEvent } from "react";

import { useCreateUser, useUpdateUser, useUsers } from "../../api/admin";
import { ErrorBox, Loading } from "../../components/ErrorBox";
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
        aria-label={`New password for ${name}`}
        autoComplete="new-password"
        value={password}
        onChange={(e) => setPassword(e.target.value)}
      />
      <button type="submit" disabled={busy || !password}>
        Set password
      </button>
      <button type="button" onClick={onDone}>
        Cancel
      </button>
      <ErrorBox error={error} title="Password not changed" />
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
      <h2>Users</h2>
      <form className="toolbar" onSubmit={create} aria-label="New user">
        <input
          aria-label="New user name"
          placeholder="name"
          value={name}
          onChange={(e) => setName(e.target.value)}
        />
        <input
          type="password"
          aria-label="New user password"
          placeholder="password"
          autoComplete="new-password"
          value={password}
          onChange={(e) => setPassword(e.target.value)}
        />
        <label>
          <input type="checkbox" checked={admin} onChange={(e) => setAdmin(e.target.checked)} /> admin
        </label>
        <button type="submit" disabled={busy || !name.trim() || !password}>
          Create user
        </button>
      </form>
      <ErrorBox error={error ?? list.error} title="Users" />
      {list.isPending && <Loading what="users" />}
      <table className="grid">
        <thead>
          <tr>
            <th>Name</th>
            <th>Role</th>
            <th>State</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {list.data?.items.map((u) => (
            <tr key={u.name} data-testid={`user-${u.name}`}>
              <td>{u.name}</td>
              <td>{u.admin ? "admin" : "user"}</td>
              <td>{u.enabled ? "✓ enabled" : "⊘ disabled"}</td>
              <td>
                <button onClick={() => void enable(u.name as string, !u.enabled)}>
                  {u.enabled ? "Disable" : "Enable"}
                </button>{" "}
                {resetting === u.name ? (
                  <ResetPassword name={u.name as string} onDone={() => setResetting(null)} />
                ) : (
                  <button onClick={() => setResetting(u.name as string)}>Reset password…</button>
                )}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
