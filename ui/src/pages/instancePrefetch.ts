// What the instance page needs, asked for by its route's loader as soon as the address is known (before the
// page renders, while the app's other requests go out): the instance, then at once its workflow version, then
// at once the version's layout in the worker (elkjs's worker warmed up only when the instance's tasks are few). The page's own queries and DagView's layout then find them in
// the query cache and the layout cache (the same keys), instead of each waiting for a render to ask.
import type { QueryClient } from "@tanstack/react-query";

import { signedIn } from "../api/client";
import { instanceQuery, versionQuery } from "../api/queries";
import { buildGraph, type TaskSpec } from "../features/graph/buildGraph";
import { layout, prewarmLayout } from "../features/graph/layout";

/** The key the instance page's DagView lays a version out under. */
export const layoutKeyOf = (code: number, version: number) => `${code}:${version}`;

export function prefetchInstance(client: QueryClient, id: number): void {
  if (!signedIn()) return; // the sign-in page comes first
  prewarmLayout();
  void (async () => {
    const detail = await client.fetchQuery(instanceQuery(id));
    prewarmLayout(detail.tasks.length); // elkjs's worker too when its graph is small enough for it
    const { workflow_code: code, workflow_version: version } = detail;
    const stored = await client.fetchQuery(versionQuery(code, version));
    await layout(layoutKeyOf(code, version), buildGraph(stored.document.tasks as TaskSpec[]));
  })().catch(() => undefined); // the page asks again and shows the error
}
