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
import { tAdmin } from "./strings";
import { tTitle } from "../components/strings";
import { useTitle } from "../components/title";

const TABS = {
  users: Users,
  grants: ProjectGrants,
  tenants: Tenants,
  datasources: DataSources,
  environments: Environments,
  "project-params": ProjectParams,
  "worker-groups": WorkerGroups,
  alerts: AlertGroups,
  "task-groups": TaskGroups,
  tokens: Tokens,
} as const;
type Tab = keyof typeof TABS;

export function AdminPage() {
  const [params, setParams] = useSearchParams();
  const asked = params.get("tab") ?? "users";
  const tab: Tab = asked in TABS ? (asked as Tab) : "users";
  const Body = TABS[tab];
  useTitle(tTitle.admin, tAdmin.tabs[tab]);
  return (
    <section>
      <h1>{tAdmin.title}</h1>
      <nav className="tabs" aria-label={tAdmin.sections}>
        {(Object.keys(TABS) as Tab[]).map((t) => (
          <button key={t} aria-current={t === tab ? "page" : undefined} onClick={() => setParams({ tab: t })}>
            {tAdmin.tabs[t]}
          </button>
        ))}
      </nav>
      <Body />
    </section>
  );
}
