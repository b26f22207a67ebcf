import { createBrowserRouter, Navigate, redirect, type LoaderFunction } from "react-router";

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

export const router = createBrowserRouter(
  [
    { path: "/signin", element: <SignIn /> },
    {
      element: <Layout />,
      loader: requireToken,
      errorElement: <NotFound />,
      children: [
        { index: true, element: <Navigate to="/overview" replace /> },
        { path: "overview", element: <OverviewPage /> },
        { path: "instances", element: <Instances /> },
        { path: "instances/:id", element: <InstancePage /> },
        { path: "tasks/:id/log", element: <TaskLog /> },
        { path: "workflows", element: <Workflows /> },
        { path: "workflows/new", element: <Editor /> },
        { path: "workflows/:code", element: <WorkflowPage /> },
        { path: "workflows/:code/edit", element: <Editor /> },
        { path: "cluster", element: <ClusterPage /> },
        { path: "alerts", element: <AlertsPage /> },
        { path: "resources", element: <ResourcesPage /> },
        {
          path: "admin",
          element: (
            <AdminOnly>
              <AdminPage />
            </AdminOnly>
          ),
        },
        { path: "tokens", element: <MyTokens /> },
        { path: "*", element: <NotFound /> },
      ],
    },
  ],
  { basename },
);
