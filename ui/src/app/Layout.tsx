import { useEffect, useRef } from "react";
import { Link, NavLink, Outlet } from "react-router";

import { useMe } from "../api/queries";
import { ConnectionBanner } from "../components/ConnectionBanner";
import { LanguageSwitch } from "../components/LanguageSwitch";
import { tCommon } from "../components/strings";
import { installFocusInvalid } from "../components/focusInvalid";
import { tSkip } from "../components/strings";
import { ZoneSwitch } from "../components/ZoneSwitch";
import { Account } from "./Account";
import { tNav } from "./strings";

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
          {tCommon.brand}
        </Link>
        <nav aria-label={tNav.main}>
          <NavLink to="/overview">{tNav.overview}</NavLink>
          <NavLink to="/instances">{tNav.instances}</NavLink>
          <NavLink to="/workflows">{tNav.workflows}</NavLink>
          <NavLink to="/resources">{tNav.resources}</NavLink>
          <NavLink to="/cluster">{tNav.cluster}</NavLink>
          <NavLink to="/alerts">{tNav.alerts}</NavLink>
          {me?.admin && <NavLink to="/admin">{tNav.admin}</NavLink>}
          {me && !me.admin && <NavLink to="/tokens">{tNav.myTokens}</NavLink>}
        </nav>
        <ZoneSwitch />
        <LanguageSwitch />
        <Account />
      </header>
      <ConnectionBanner />
      <main className="content" id="content" ref={main} tabIndex={-1}>
        <Outlet />
      </main>
    </div>
  );
}
