// The instance route's loader asks for the instance, its workflow version and the version's layout one after
// the other at once, with no render in between, under the keys the page then reads.
import { QueryClient } from "@tanstack/react-query";
import { afterEach, describe, expect, it, vi } from "vitest";

import { token } from "../api/client";
import { keys } from "../api/queries";
import { layout, prewarmLayout } from "../features/graph/layout";
import { prefetchInstance } from "./instancePrefetch";

const asked = vi.hoisted(() => {
  const paths: string[] = [];
  const json = (body: unknown) =>
    new Response(JSON.stringify(body), { status: 200, headers: { "Content-Type": "application/json" } });
  globalThis.fetch = (async (input: RequestInfo | URL, init?: RequestInit) => {
    const path = new URL((input instanceof Request ? input : new Request(input, init)).url).pathname;
    paths.push(path);
    if (path === "/api/v1/instances/5")
      return json({ id: 5, workflow_code: 11, workflow_version: 2, tasks: [] });
    if (path === "/api/v1/workflows/11/versions/2")
      return json({ version: 2, document: { tasks: [{ name: "a", type: "SHELL" }] } });
    return new Response("{}", { status: 404 });
  }) as typeof fetch;
  return paths;
});

vi.mock("../features/graph/layout", () => ({
  layout: vi.fn(() => Promise.resolve(new Map())),
  prewarmLayout: vi.fn(),
}));

afterEach(() => {
  token.clear();
  asked.length = 0;
  vi.mocked(layout).mockClear();
  vi.mocked(prewarmLayout).mockClear();
});

describe("prefetchInstance", () => {
  it("asks for the instance, then its version, then the version's layout, under the page's keys", async () => {
    token.set("a-token");
    const client = new QueryClient({ defaultOptions: { queries: { retry: false } } });
    prefetchInstance(client, 5);
    await vi.waitFor(() => expect(layout).toHaveBeenCalled());
    expect(asked).toEqual(["/api/v1/instances/5", "/api/v1/workflows/11/versions/2"]);
    const [key, graph] = vi.mocked(layout).mock.calls[0]!;
    expect(key).toBe("11:2");
    expect(prewarmLayout).toHaveBeenLastCalledWith(0); // told how many tasks: elkjs's worker only for few
    expect(graph.nodes.map((n) => n.id)).toEqual(["a"]);
    expect(client.getQueryData(keys.instance(5))).toMatchObject({ id: 5 });
    expect(client.getQueryData(keys.version(11, 2))).toMatchObject({ version: 2 });
  });

  it("asks for nothing before sign-in", () => {
    const client = new QueryClient();
    prefetchInstance(client, 5);
    expect(client.getQueryCache().getAll()).toEqual([]); // a query asked for is in the cache at once
    expect(prewarmLayout).not.toHaveBeenCalled();
  });
});
