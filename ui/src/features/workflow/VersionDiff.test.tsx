import { QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { cleanup, render, screen } from "@testing-library/react";
import { afterEach, describe, expect, it, vi } from "vitest";

import { VersionDiff } from "./VersionDiff";

/** A fake API server: workflow 5 with two versions, as engine/api/workflows.py answers. */
vi.hoisted(() => {
  const json = (body: unknown) =>
    new Response(JSON.stringify(body), { status: 200, headers: { "Content-Type": "application/json" } });
  const doc = (script: string) => ({
    name: "etl",
    tasks: [{ name: "a", type: "SHELL", params: { rawScript: script } }],
  });
  globalThis.fetch = ((input: RequestInfo | URL, init?: RequestInit) => {
    const request = input instanceof Request ? input : new Request(input, init);
    const path = new URL(request.url).pathname;
    if (path === "/api/v1/workflows/5/versions")
      return Promise.resolve(
        json({
          page: 1,
          size: 50,
          total: 2,
          items: [
            { version: 2, current: true, create_time: "2026-11-27T00:00:00Z" },
            { version: 1, current: false, create_time: "2026-11-26T00:00:00Z" },
          ],
        }),
      );
    const version = /^\/api\/v1\/workflows\/5\/versions\/(\d)$/.exec(path)?.[1];
    if (version) return Promise.resolve(json({ version: Number(version), document: doc(`echo ${version}`) }));
    return Promise.resolve(new Response("{}", { status: 404 }));
  }) as typeof fetch;
});

afterEach(cleanup);

describe("VersionDiff", () => {
  it("is a labelled region reachable by keyboard, so a wide or long diff scrolls with the arrow keys", async () => {
    const client = new QueryClient({ defaultOptions: { queries: { retry: false } } });
    render(
      <QueryClientProvider client={client}>
        <VersionDiff code={5} current={2} />
      </QueryClientProvider>,
    );
    const diff = await screen.findByTestId("version-diff");
    await screen.findByText(/echo 2/);
    expect(diff.tabIndex).toBe(0);
    expect(screen.getByRole("region", { name: "Changes from v1 to v2" })).toBe(diff);
  });
});
