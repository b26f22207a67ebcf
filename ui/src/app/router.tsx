import type { ComponentType } from "react";
import { createBrowserRouter, Navigate, redirect, type LoaderFunction, type RouteObject } from "react-router";

import { signedIn } from "../api/client";
import { meQuery } from "../api/queries";
import { idParam } from "../components/BadAddress";
import { InstancePage } from "../pages/Instance";
import { prefetchInstance } from "../pages/instancePrefetch";
import { Instances } from "../pages/Instances";
import { NotFound } from "../pages/NotFound";
import { OverviewPage } from "../pages/Overview";
import { SignIn } from "../pages/SignIn";
import { AdminOnly } from "./AdminOnly";
import { Layout } from "./Layout";
import { queryClient } from "./queryClient";

/** The app's path prefix, from <base href> (it may be served under a proxy prefix). */
export const basename = new URL(".", document.baseURI).pathname.replace(/\/$/, "") || "/";

const requireToken: LoaderFunction = ({ request }) => {
  if (signedIn()) {
    void queryClient.prefetchQuery(meQuery); // the header's and the pages' rights, asked for with the page's data
    return null;
  }
  const url = new URL(request.url);
  const here = url.pathname.slice(basename === "/" ? 0 : basename.length) + url.search;
  return redirect(`/signin?next=${encodeURIComponent(here)}`);
};

/** A page loaded when its route is first visited: the initial JavaScript holds the shell and the screens a
 * cold start most often opens (overview, instances, an instance's page) and parses nothing else before the
 * instance page's requests go out; the editor, admin and the other screens are chunks of their own. */
function page<K extends string>(load: () => Promise<Record<K, ComponentType>>, name: K) {
  return async () => ({ Component: (await load())[name] });
}
const editor = page(() => import("../pages/Editor"), "Editor");

/** Every screen. A route's id is its path pattern: each browser test's accessibility audit names the route it
 * audits (tests/e2e/a11y.mjs checks the page's address matches it), and routes.test.tsx fails when a route has
 * no audit. */
export const routes: RouteObject[] = [
  { id: "/signin", path: "/signin", element: <SignIn /> },
  {
    element: <Layout />,
    loader: requireToken,
    errorElement: <NotFound />,
    children: [
      { index: true, element: <Navigate to="/overview" replace /> },
      { id: "overview", path: "overview", element: <OverviewPage /> },
      { id: "instances", path: "instances", element: <Instances /> },
      {
        id: "instances/:id",
        path: "instances/:id",
        element: <InstancePage />,
        // its data asked for now, not once the page has rendered (the loader does not wait for it)
        loader: ({ params }) => {
          const id = idParam(params.id);
          if (id !== null) prefetchInstance(queryClient, id);
          return null;
        },
      },
      { id: "tasks/:id/log", path: "tasks/:id/log", lazy: page(() => import("../pages/TaskLog"), "TaskLog") },
      { id: "workflows", path: "workflows", lazy: page(() => import("../pages/Workflows"), "Workflows") },
      { id: "workflows/new", path: "workflows/new", lazy: editor },
      {
        id: "workflows/:code",
        path: "workflows/:code",
        lazy: page(() => import("../pages/Workflow"), "WorkflowPage"),
      },
      { id: "workflows/:code/edit", path: "workflows/:code/edit", lazy: editor },
      { id: "cluster", path: "cluster", lazy: page(() => import("../pages/Cluster"), "ClusterPage") },
      { id: "alerts", path: "alerts", lazy: page(() => import("../pages/Alerts"), "AlertsPage") },
      { id: "resources", path: "resources", lazy: page(() => import("../pages/Resources"), "ResourcesPage") },
      {
        id: "admin",
        path: "admin",
        lazy: async () => {
          const { AdminPage } = await import("../pages/Admin");
          return {
            element: (
              <AdminOnly>
                <AdminPage />
              </AdminOnly>
            ),
          };
        },
      },
      { id: "tokens", path: "tokens", lazy: page(() => import("./MyTokens"), "MyTokens") },
      { id: "*", path: "*", element: <NotFound /> },
    ],
  },
];

export const router = createBrowserRouter(routes, { basename });
