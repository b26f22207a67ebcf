import { QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { cleanup, fireEvent, render, screen, waitFor } from "@testing-library/react";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { createMemoryRouter, RouterProvider, type RouteObject } from "react-router";
import { afterEach, beforeAll, describe, expect, it, vi } from "vitest";

import { token } from "../api/client";
import { routes } from "./router";

/** A fake API server: an admin signed in, every other object unknown (404), as engine/api answers; a Web Worker
 * that never answers (the graph layout's, which happy-dom lacks). */
vi.hoisted(() => {
  globalThis.Worker = class {
    onmessage = null;
    postMessage() {}
    terminate() {}
    addEventListener() {}
    removeEventListener() {}
  } as unknown as typeof Worker;
  const json = (status: number, body: unknown) =>
    new Response(JSON.stringify(body), { status, headers: { "Content-Type": "application/json" } });
  globalThis.fetch = ((input: RequestInfo | URL, init?: RequestInit) => {
    const request = input instanceof Request ? input : new Request(input, init);
    const path = new URL(request.url).pathname;
    if (path === "/api/v1/me") return Promise.resolve(json(200, { user: "ann", admin: true, projects: [] }));
    return Promise.resolve(json(404, { error: { message: `${path} not found` } }));
  }) as typeof fetch;
});

/** The route ids (= path patterns) of every screen, the index redirect left out. */
function ids(list: RouteObject[]): string[] {
  return list.flatMap((r) => [...(r.id && r.path ? [r.id] : []), ...ids(r.children ?? [])]);
}

/** One address per route and the title its page must show (screen, then object, then the app). */
const SAMPLES: Record<string, { address: string; title: string }> = {
  "/signin": { address: "/signin", title: "Sign in · Porpoise" },
  overview: { address: "/overview", title: "Overview · Porpoise" },
  instances: { address: "/instances", title: "Workflow instances · Porpoise" },
  "instances/:id": { address: "/instances/42", title: "Instance 42 · Porpoise" },
  "tasks/:id/log": { address: "/tasks/7/log", title: "Log of task 7 · Porpoise" },
  workflows: { address: "/workflows", title: "Workflows · Porpoise" },
  "workflows/new": { address: "/workflows/new", title: "New workflow · Porpoise" },
  "workflows/:code": { address: "/workflows/9", title: "Workflow 9 · Porpoise" },
  "workflows/:code/edit": { address: "/workflows/9/edit", title: "Edit workflow 9 · Porpoise" },
  cluster: { address: "/cluster", title: "Cluster · Porpoise" },
  alerts: { address: "/alerts", title: "Alerts · Porpoise" },
  resources: { address: "/resources", title: "Resources · Porpoise" },
  admin: { address: "/admin", title: "Admin · Users · Porpoise" },
  tokens: { address: "/tokens", title: "My tokens · Porpoise" },
  "*": { address: "/no/such/page", title: "Nothing here · Porpoise" },
};

function show(address: string) {
  const client = new QueryClient({ defaultOptions: { queries: { retry: false } } });
  render(
    <QueryClientProvider client={client}>
      <RouterProvider router={createMemoryRouter(routes, { initialEntries: [address] })} />
    </QueryClientProvider>,
  );
}

beforeAll(() => token.set("a-token"));
afterEach(() => {
  cleanup();
  document.title = "";
});

describe("every route", () => {
  it("has a sample address and title here", () => {
    expect(Object.keys(SAMPLES).sort()).toEqual(ids(routes).sort());
  });

  it.each(Object.entries(SAMPLES))("%s sets a title naming its screen and object", async (_, sample) => {
    show(sample.address);
    await waitFor(() => expect(document.title).toBe(sample.title));
  });

  it("is audited by axe-core in a browser test (tests/e2e/*.mjs: audit(name, route))", () => {
    const dir = join(__dirname, "../../tests/e2e");
    const audited = new Set(
      readdirSync(dir)
        .filter((f) => f.endsWith(".mjs"))
        .flatMap((f) => [
          ...readFileSync(join(dir, f), "utf8").matchAll(
            /\b(?:audit|violations)\((?:page,\s*)?"[^"]*",\s*"([^"]+)"/g,
          ),
        ])
        .map((m) => m[1]),
    );
    expect(ids(routes).filter((id) => !audited.has(id))).toEqual([]);
  });
});

describe("the skip link", () => {
  it("is the first focusable element and moves focus to the main region", async () => {
    show("/overview");
    const skip = await screen.findByRole("link", { name: "Skip to content" });
    const focusable = document.querySelectorAll("a[href], button, input, select, textarea, [tabindex]");
    expect(focusable[0]).toBe(skip);
    fireEvent.click(skip);
    const main = screen.getByRole("main");
    expect(document.activeElement).toBe(main);
  });
});
