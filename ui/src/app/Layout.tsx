import { useEffect, useRef } from "react";
import { Link, NavLink, Outlet } from "react-router";

import { useMe } from "../api/queries";
import { ConnectionBanner } from "../components/ConnectionBanner";
import { installFocusInvalid } from "../components/focusInvalid";
import { tSkip } from "../components/strings";
import { ZoneSwitch } from "../components/ZoneSwitch";
import { Account } from "./Account";

export function Layout() {
  const me = useMe().data;
  const main = useRef<HTMLElement>(null);
  // after a refused save, focus on the first invalid field of any form of the app
  useEffect(() => installFocusInvalid(), []);
  return (
    <div className="app">
      {/* the first focusable element: past the header and its navigation to the page itself */}
      <a
        href="#content"
        className="skip-link"
        onClick={(e) => {
          e.preventDefault();
          main.current?.focus();
        }}
      >
        {tSkip.toContent}
      </a>
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
      <main className="content" id="content" ref={main} tabIndex={-1}>
        <Outlet />
      </main>
    </div>
  );
}
