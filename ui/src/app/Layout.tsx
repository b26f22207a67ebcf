import { Link, NavLink, Outlet } from "react-router";

import { useMe } from "../api/queries";
import { ConnectionBanner } from "../components/ConnectionBanner";
import { ZoneSwitch } from "../components/ZoneSwitch";
import { Account } from "./Account";

export function Layout() {
  const me = useMe().data;
  return (
    <div className="app">
      <header className="top">
        <Link to="/overview" className="brand">
          Porpoise
        </Link>
        <nav aria-label="Main">
          <NavLink to="/overview">Overview</NavLink>
          <NavLink to="/instances">Instances</NavLink>
          <NavLink to="/workflows">Workflows</NavLink>
          <NavLink to="/resources">Resources</NavLink>
          <NavLink to="/cluster">Cluster</NavLink>
          <NavLink to="/alerts">Alerts</NavLink>
          {me?.admin && <NavLink to="/admin">Admin</NavLink>}
          {me && !me.admin && <NavLink to="/tokens">My tokens</NavLink>}
        </nav>
        <ZoneSwitch />
        <Account />
      </header>
      <ConnectionBanner />
      <main className="content">
        <Outlet />
      </main>
    </div>
  );
}
