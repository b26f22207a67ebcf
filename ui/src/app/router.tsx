import { createBrowserRouter, Navigate, redirect, type LoaderFunction, type RouteObject } from "react-router";

import { signedIn } from "../api/client";
import { AdminPage } from "../pages/Admin";
import { AlertsPage } from "../pages/Alerts";
import { ClusterPage } from "../pages/Cluster";
import { Editor } from "../pages/Editor";
import { InstancePage } from "../pages/Instance";
import { Instances } from "../pages/Instances";
import { NotFound } from "../pages/NotFound";
import { OverviewPage } from "../pages/Overview";
import { ResourcesPage } from "../pages/Resources";
import { SignIn } from "../pages/SignIn";
import { TaskLog } from "../pages/TaskLog";
import { WorkflowPage } from "../pages/Workflow";
import { Workflows } from "../pages/Workflows";
import { AdminOnly } from "./AdminOnly";
import { Layout } from "./Layout";
import { MyTokens } from "./MyTokens";

/** The app's path prefix, from <base href> (it may be served under a proxy prefix). */
export const basename = new URL(".", document.baseURI).pathname.replace(/\/$/, "") || "/";

const requireToken: LoaderFunction = ({ request }) => {
  if (signedIn()) return null;
  const url = new URL(request.url);
  const here = url.pathname.slice(basename === "/" ? 0 : basename.length) + url.search;
  return redirect(`/signin?next=${encodeURIComponent(here)}`);
};

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
      { id: "instances/:id", path: "instances/:id", element: <InstancePage /> },
      { id: "tasks/:id/log", path: "tasks/:id/log", element: <TaskLog /> },
      { id: "workflows", path: "workflows", element: <Workflows /> },
      { id: "workflows/new", path: "workflows/new", element: <Editor /> },
      { id: "workflows/:code", path: "workflows/:code", element: <WorkflowPage /> },
      { id: "workflows/:code/edit", path: "workflows/:code/edit", element: <Editor /> },
      { id: "cluster", path: "cluster", element: <ClusterPage /> },
      { id: "alerts", path: "alerts", element: <AlertsPage /> },
      { id: "resources", path: "resources", element: <ResourcesPage /> },
      {
        id: "admin",
        path: "admin",
        element: (
          <AdminOnly>
            <AdminPage />
          </AdminOnly>
        ),
      },
      { id: "tokens", path: "tokens", element: <MyTokens /> },
      { id: "*", path: "*", element: <NotFound /> },
    ],
  },
];

export const router = createBrowserRouter(routes, { basename });
