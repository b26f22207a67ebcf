// Tenants (the OS users a workflow's tasks run as): create, delete (refused while a workflow names it), grant
// to a project (its workflows may then run as the tenant) and revoke. The API's refusals are shown as they are.
import { useState, type FormEvent } from "react";

import {
  useCreateTenant,
  useDeleteTenant,
  useGrantResource,
  useProjects,
  useResourceGrantList,
  useRevokeGrant,
  useTenants,
} from "../../api/admin";
import { ErrorBox } from "../../components/ErrorBox";
import { useAction } from "./useAction";

/** A row of GET /api/v1/grants (the API documents no item schema for it). */
export interface ResourceGrant {
  id: number;
  resource: string | null;
  project: string | null;
  user: string | null;
}

/** (tenant, project) -> the grant's id, to revoke it. */
export function grantIds(grants: readonly ResourceGrant[]): Map<string, number> {
  const out = new Map<string, number>();
  for (const g of grants) if (g.resource && g.project) out.set(`${g.resource}\u0000${g.project}`, g.id);
  return out;
}

export function Tenants() {
  const tenants = useTenants();
  const grants = useResourceGrantList("tenant");
  const projects = useProjects();
  const creation = useCreateTenant();
  const removal = useDeleteTenant();
  const granting = useGrantResource("tenant");
  const revocation = useRevokeGrant("tenant");
  const { run, error, busy } = useAction(["tenants"]);
  const [name, setName] = useState("");
  const [description, setDescription] = useState("");
  const ids = grantIds((grants.data?.items ?? []) as unknown as ResourceGrant[]);
  const projectNames = (projects.data?.items ?? []).flatMap((p) => (p.name ? [p.name] : []));

  const create = async (e: FormEvent) => {
    e.preventDefault();
    const body = description.trim() ? { name, description } : { name };
    if (await run(() => creation.mutateAsync(body))) {
      setName("");
      setDescription("");
    }
  };
  const remove = (tenant: string) => run(() => removal.mutateAsync(tenant));
  const grant = (tenant: string, project: string) =>
    run(() => granting.mutateAsync({ resource: tenant, to: { project } }));
  const revoke = (id: number) => run(() => revocation.mutateAsync(id));

  return (
    <div data-testid="admin-tenants">
      <h2>Tenants</h2>
      <p className="muted">
        A workflow runs as <code>default</code> (the worker&apos;s own user) or as a tenant granted to its
        project.
      </p>
      <form className="toolbar" onSubmit={create} aria-label="New tenant">
        <input
          aria-label="Tenant name"
          placeholder="OS user name"
          value={name}
          onChange={(e) => setName(e.target.value)}
        />
        <input
          aria-label="Tenant description"
          placeholder="description (optional)"
          value={description}
          onChange={(e) => setDescription(e.target.value)}
        />
        <button type="submit" disabled={busy || !name.trim()}>
          Create tenant
        </button>
      </form>
      <ErrorBox error={error ?? tenants.error ?? grants.error ?? projects.error} title="Tenants" />
      <table className="grid">
        <thead>
          <tr>
            <th>Tenant</th>
            <th>Description</th>
            <th>Granted to projects</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {tenants.data?.items.map((t) => {
            const tenant = t.name ?? "";
            return (
              <tr key={tenant} data-testid={`tenant-${tenant}`}>
                <td>{tenant}</td>
                <td>{t.description}</td>
                <td>
                  <ul className="plain">
                    {(t.projects ?? []).map((p) => {
                      const id = ids.get(`${tenant}\u0000${p}`);
                      return (
                        <li key={p}>
                          {p}{" "}
                          {id !== undefined && (
                            <button
                              className="link"
                              aria-label={`Revoke ${tenant} from ${p}`}
                              disabled={busy}
                              onClick={() => void revoke(id)}
                            >
                              revoke
                            </button>
                          )}
                        </li>
                      );
                    })}
                  </ul>
                  <GrantTo
                    tenant={tenant}
                    projects={projectNames.filter((p) => !(t.projects ?? []).includes(p))}
                    busy={busy}
                    onGrant={(p) => void grant(tenant, p)}
                  />
                </td>
                <td>
                  <button disabled={busy} onClick={() => void remove(tenant)}>
                    Delete
                  </button>
                </td>
              </tr>
            );
          })}
        </tbody>
      </table>
    </div>
  );
}

function GrantTo({
  tenant,
  projects,
  busy,
  onGrant,
}: {
  tenant: string;
  projects: readonly string[];
  busy: boolean;
  onGrant: (project: string) => void;
}) {
  const [project, setProject] = useState("");
  return (
    <form
      className="toolbar"
      aria-label={`Grant ${tenant}`}
      onSubmit={(e) => {
        e.preventDefault();
        if (project) onGrant(project);
        setProject("");
      }}
    >
      <select
        aria-label={`Project to grant ${tenant} to`}
        value={project}
        onChange={(e) => setProject(e.target.value)}
      >
        <option value="">project…</option>
        {projects.map((p) => (
          <option key={p}>{p}</option>
        ))}
      </select>
      <button type="submit" disabled={busy || !project}>
        Grant
      </button>
    </form>
  );
}
