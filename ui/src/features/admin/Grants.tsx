// Who may do what in a project (its owner or an admin grants READ / EXECUTE / WRITE to users), and which users
// or projects may use a data source or an alert group (admins).
import { useState, type FormEvent } from "react";

import { useProjectGrants, useProjects, useRevokeProjectGrant, useSetProjectGrant } from "../../api/admin";
import { ErrorBox } from "../../components/ErrorBox";
import { useAction } from "./useAction";

const PERMS = ["READ", "EXECUTE", "WRITE"] as const;
type Perm = (typeof PERMS)[number];

export function ProjectGrants() {
  const projects = useProjects();
  const [project, setProject] = useState("");
  const grants = useProjectGrants(project);
  const setting = useSetProjectGrant(project);
  const revocation = useRevokeProjectGrant(project);
  const { run, error, busy } = useAction(["grants", project]);
  const [user, setUser] = useState("");
  const [perms, setPerms] = useState<Perm[]>(["READ"]);
  const grant = async (e: FormEvent) => {
    e.preventDefault();
    await run(() => setting.mutateAsync({ user, perms }));
  };
  const revoke = (who: string) => run(() => revocation.mutateAsync(who));
  const items = grants.data?.items ?? [];
  return (
    <div data-testid="admin-grants">
      <h2>Project grants</h2>
      <label>
        Project{" "}
        <select value={project} onChange={(e) => setProject(e.target.value)}>
          <option value="">choose…</option>
          {projects.data?.items.map((p) => (
            <option key={p.name}>{p.name}</option>
          ))}
        </select>
      </label>
      <ErrorBox error={error ?? grants.error ?? projects.error} title="Grants" />
      {project && (
        <>
          <p className="muted">Owner: {grants.data?.owner ?? "—"} (the owner and admins hold every right)</p>
          <form className="toolbar" onSubmit={grant} aria-label="Grant rights">
            <input
              aria-label="User to grant"
              placeholder="user"
              value={user}
              onChange={(e) => setUser(e.target.value)}
            />
            {PERMS.map((p) => (
              <label key={p}>
                <input
                  type="checkbox"
                  checked={perms.includes(p)}
                  onChange={(e) => setPerms(e.target.checked ? [...perms, p] : perms.filter((x) => x !== p))}
                />{" "}
                {p}
              </label>
            ))}
            <button type="submit" disabled={busy || !user.trim() || perms.length === 0}>
              Grant
            </button>
          </form>
          <table className="grid">
            <thead>
              <tr>
                <th>User</th>
                <th>Rights</th>
                <th />
              </tr>
            </thead>
            <tbody>
              {items.map((g) => (
                <tr key={g.user}>
                  <td>{g.user}</td>
                  <td>{g.perms?.join(", ")}</td>
                  <td>
                    <button onClick={() => void revoke(g.user ?? "")}>Revoke</button>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </>
      )}
    </div>
  );
}
