import { Link, NavLink, Outlet } from "react-router";

import { ConnectionBanner } from "../components/ConnectionBanner";
import { signOut } from "./session";

export function Layout() {
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
          <NavLink to="/admin">Admin</NavLink>
        </nav>
        <button className="link" onClick={() => void signOut()}>
          Sign out
        </button>
      </header>
      <ConnectionBanner />
      <main className="content">
        <Outlet />
      </main>
    </div>
  );
}
