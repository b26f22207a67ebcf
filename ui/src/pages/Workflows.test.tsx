import { QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { act, cleanup, render, screen } from "@testing-library/react";
import { createMemoryRouter, RouterProvider } from "react-router";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";

import { setDisplayZone } from "../components/time";
import { Workflows } from "./Workflows";

/** A fake API answering as engine/api/workflows.py does. */
vi.hoisted(() => {
  const json = (body: unknown) =>
    new Response(JSON.stringify(body), { status: 200, headers: { "Content-Type": "application/json" } });
  globalThis.fetch = (async (input: RequestInfo | URL, init?: RequestInit) => {
    const request = input instanceof Request ? input : new Request(input, init);
    const url = new URL(request.url);
    if (url.pathname === "/api/v1/workflows")
      return json({
        page: 1,
        size: 50,
        total: 1,
        items: [
          {
            code: 9,
            name: "nightly",
            project: "etl",
            version: 1,
            release_state: "ONLINE",
            last_runs: [],
            next_fire_time: "2026-11-27T18:00:00Z",
            next_fire_timezone: "Asia/Shanghai",
            update_time: "2026-11-26T10:00:00Z",
          },
        ],
      });
    if (url.pathname === "/api/v1/me") return json({ user: "root", admin: true, projects: [] });
    return new Response("{}", { status: 404 });
  }) as typeof fetch;
});

beforeEach(() => act(() => setDisplayZone("UTC")));
afterEach(cleanup);

describe("the workflows list", () => {
  it("shows the next fire in its schedule's zone and in the viewer's", async () => {
    const router = createMemoryRouter([{ path: "/workflows", element: <Workflows /> }], {
      initialEntries: ["/workflows"],
    });
    render(
      <QueryClientProvider client={new QueryClient({ defaultOptions: { queries: { retry: false } } })}>
        <RouterProvider router={router} />
      </QueryClientProvider>,
    );
    const next = await screen.findByTestId("next-fire-9");
    expect(next.textContent).toContain("02:00:00 Asia/Shanghai");
    expect(next.textContent).toContain("18:00:00 UTC for you");
  });
});
