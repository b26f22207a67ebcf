import { QueryClient } from "@tanstack/react-query";
import { describe, expect, it } from "vitest";

import { reloadAfterGap } from "./useLive";

describe("reloadAfterGap", () => {
  it("marks stale what a missed state change could have changed, and keeps who is signed in and stored versions", async () => {
    const client = new QueryClient();
    const keys = [
      ["me"],
      ["workflow-version", 1, 2],
      ["instance", 7],
      ["instances", {}],
      ["overview"],
      ["task", 3],
    ];
    for (const key of keys) client.setQueryData(key, { any: "thing" });
    await reloadAfterGap(client);
    const invalidated = keys.filter((key) => client.getQueryState(key)?.isInvalidated);
    expect(invalidated).toEqual([["instance", 7], ["instances", {}], ["overview"], ["task", 3]]);
  });
});
