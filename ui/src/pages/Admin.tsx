// Admin: users, project grants, tenants, data sources, environments, project parameters, worker groups, alert
// groups, task groups, API tokens; one tab each, reachable by URL (?tab=users ...).
import { useSearchParams } from "react-router";

import { AlertGroups } from "../features/admin/AlertGroups";
import { DataSources } from "../features/admin/DataSources";
import { Environments } from "../features/admin/Environments";
import { ProjectGrants } from "../features/admin/Grants";
import { ProjectParams } from "../features/admin/ProjectParams";
import { TaskGroups } from "../features/admin/TaskGroups";
import { Tenants } from "../features/admin/Tenants";
import { Tokens } from "../features/admin/Tokens";
import { Users } from "../features/admin/Users";
import { WorkerGroups } from "../features/admin/WorkerGroups";
import { tTitle } from "../components/strings";
import { useTitle } from "../components/title";

const TABS = {
  users: ["Users", Users],
  grants: ["Project grants", ProjectGrants],
  tenants: ["Tenants", Tenants],
  datasources: ["Data sources", DataSources],
  environments: ["Environments", Environments],
  "project-params": ["Project parameters", ProjectParams],
  "worker-groups": ["Worker groups", WorkerGroups],
  alerts: ["Alert groups", AlertGroups],
  "task-groups": ["Task groups", TaskGroups],
  tokens: ["API tokens", Tokens],
} as const;
type Tab = keyof typeof TABS;

export function AdminPage() {
  const [params, setParams] = useSearchParams();
  const asked = params.get("tab") ?? "users";
  const tab: Tab = asked in TABS ? (asked as Tab) : "users";
  const [, Body] = TABS[tab];
  useTitle(tTitle.admin, TABS[tab][0]);
  return (
    <section>
      <h1>Admin</h1>
      <nav className="tabs" aria-label="Admin sections">
        {(Object.keys(TABS) as Tab[]).map((t) => (
          <button key={t} aria-current={t === tab ? "page" : undefined} onClick={() => setParams({ tab: t })}>
            {TABS[t][0]}
          </button>
        ))}
      </nav>
      <Body />
    </section>
  );
}
