// One live stream per page: patches the query cache from state changes, batched on a microtask
// (requestAnimationFrame never fires in a hidden tab), and reloads after a hello/reset (missed changes).
import { useQueryClient, type QueryClient } from "@tanstack/react-query";
import { useEffect } from "react";

import type { InstanceDetail, InstancePage } from "../../api/client";
import { openEvents } from "../../api/stream";
import { signOut } from "../../app/session";
import { connection } from "./connection";
import { patchInstanceDetail, patchInstancePage, type Change } from "./patch";

const scheduled = new Map<string, ReturnType<typeof setTimeout>>();

/** Refetch ``key`` within a second, at most once a second (a 1,000-task run changes states constantly). */
function refetchSoon(client: QueryClient, key: readonly unknown[]): void {
  const id = JSON.stringify(key);
  if (scheduled.has(id)) return;
  scheduled.set(
    id,
    setTimeout(() => {
      scheduled.delete(id);
      void client.invalidateQueries({ queryKey: key, exact: true, refetchType: "active" });
    }, 1000),
  );
}

/** Queries a state change cannot make stale: who is signed in (rights change through their own screens) and
 * stored workflow versions (a version is never changed once saved). */
const UNAFFECTED_BY_STATES = new Set<unknown>(["me", "workflow-version"]);

/** After a hello or a reset (changes may have been missed before the stream was open): everything cached that a
 * state change could have made stale is fetched again; the rest is kept (a cold instance page otherwise asked
 * for /me and its workflow version a second time right after the first answers). */
export function reloadAfterGap(client: QueryClient): Promise<void> {
  return client.invalidateQueries({ predicate: (query) => !UNAFFECTED_BY_STATES.has(query.queryKey[0]) });
}

/** Apply a batch of changes to every cached instance list and instance detail. */
export function applyChanges(client: QueryClient, changes: Change[]): void {
  let refetchLists = false;
  for (const [key, page] of client.getQueriesData<InstancePage>({ queryKey: ["instances"] })) {
    if (!page) continue;
    const result = patchInstancePage(page, changes);
    if (result.page !== page) client.setQueryData(key, result.page);
    // a new instance may belong on the first page of a list (filters decide): refetch it
    if (result.missing.length > 0 && page.page === 1) refetchLists = true;
  }
  if (refetchLists) void client.invalidateQueries({ queryKey: ["instances"] });
  if (changes.some((c) => c.kind === "instance")) {
    refetchSoon(client, ["overview"]);
    for (const [key] of client.getQueriesData({ queryKey: ["workflows"] })) refetchSoon(client, key);
  }
  for (const [key, detail] of client.getQueriesData<InstanceDetail>({ queryKey: ["instance"] })) {
    if (!detail) continue;
    const result = patchInstanceDetail(detail, changes);
    if (result.detail !== detail) {
      client.setQueryData(key, result.detail);
      // times, hosts and new attempts are not in the change: fetch them soon
      refetchSoon(client, key);
    }
  }
}

export function useLive(instance?: number): void {
  const client = useQueryClient();
  useEffect(() => {
    let pending: Change[] = [];
    const flush = () => {
      const batch = pending;
      pending = [];
      if (batch.length > 0) applyChanges(client, batch);
    };
    const stream = openEvents(instance, {
      onStatus: (ok) => connection.reportStream(ok),
      onUnauthorized: () => void signOut(),
      onEvent: (event) => {
        if (event.event === "hello" || event.event === "reset") {
          void reloadAfterGap(client);
        } else if (event.event === "states") {
          if (pending.length === 0) queueMicrotask(flush);
          pending.push(...(JSON.parse(event.data) as Change[]));
        }
      },
    });
    return () => {
      stream.close();
      connection.reportStream(true);
    };
  }, [client, instance]);
}
