// Who may use a data source or an environment (admins grant it to users or to projects: POST /api/v1/grants),
// as a table cell: the grants with a revoke button each, and a form to add one.
import { useState } from "react";

import { useGrantResource, useProjects, useResourceGrantList, useRevokeGrant } from "../../api/admin";
import { tGrants as t } from "./strings";
import type { ResourceGrant } from "./Tenants";

export type GrantedKind = "datasource" | "environment";

/** The grants of every resource of ``kind`` (admins), the projects a grant may name, and the grant and revoke
 * calls. */
export function useResourceGrants(kind: GrantedKind) {
  const grants = useResourceGrantList(kind);
  const projects = useProjects();
  const granting = useGrantResource(kind);
  const revocation = useRevokeGrant(kind);
  return {
    grants: (grants.data?.items ?? []) as unknown as ResourceGrant[],
    projects: (projects.data?.items ?? []).flatMap((p) => (p.name ? [p.name] : [])),
    error: grants.error ?? projects.error,
    grant: (resource: string, to: { project: string } | { user: string }) =>
      granting.mutateAsync({ resource, to }),
    revoke: (id: number) => revocation.mutateAsync(id),
  };
}

/** Who a grant is to, as shown. */
export function grantee(g: ResourceGrant): string {
  return g.project ? t.project(g.project) : t.user(g.user ?? "");
}

export function GrantsCell({
  resource,
  grants,
  projects,
  busy,
  onGrant,
  onRevoke,
}: {
  resource: string;
  /** this resource's grants */
  grants: readonly ResourceGrant[];
  projects: readonly string[];
  busy: boolean;
  onGrant: (to: { project: string } | { user: string }) => void;
  onRevoke: (id: number) => void;
}) {
  const [kind, setKind] = useState<"project" | "user">("project");
  const [target, setTarget] = useState("");
  const granted = new Set(grants.flatMap((g) => (g.project ? [g.project] : [])));
  return (
    <>
      {grants.length === 0 ? (
        <span className="muted small">{t.none}</span>
      ) : (
        <ul className="plain">
          {grants.map((g) => (
            <li key={g.id}>
              {grantee(g)}{" "}
              <button
                className="link"
                aria-label={t.revoke(resource, grantee(g))}
                disabled={busy}
                onClick={() => onRevoke(g.id)}
              >
                {t.revokeShort}
              </button>
            </li>
          ))}
        </ul>
      )}
      <form
        className="toolbar"
        aria-label={t.grantTo(resource)}
        onSubmit={(e) => {
          e.preventDefault();
          if (!target.trim()) return;
          onGrant(kind === "project" ? { project: target } : { user: target.trim() });
          setTarget("");
        }}
      >
        <select
          aria-label={t.kind(resource)}
          value={kind}
          onChange={(e) => {
            setKind(e.target.value === "user" ? "user" : "project");
            setTarget("");
          }}
        >
          <option value="project">{t.toProject}</option>
          <option value="user">{t.toUser}</option>
        </select>
        {kind === "project" ? (
          <select
            aria-label={t.projectPick(resource)}
            value={target}
            onChange={(e) => setTarget(e.target.value)}
          >
            <option value="">{t.choose}</option>
            {projects
              .filter((p) => !granted.has(p))
              .map((p) => (
                <option key={p}>{p}</option>
              ))}
          </select>
        ) : (
          <input
            aria-label={t.userPick(resource)}
            placeholder={t.userPlaceholder}
            value={target}
            onChange={(e) => setTarget(e.target.value)}
          />
        )}
        <button type="submit" disabled={busy || !target.trim()}>
          {t.grant}
        </button>
      </form>
    </>
  );
}
