import { QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { cleanup, render, screen } from "@testing-library/react";
import { MemoryRouter, Route, Routes } from "react-router";
import { afterEach, describe, expect, it, vi } from "vitest";

import { WorkflowPage } from "./Workflow";

/** A fake API server that knows no workflow (as engine/api/workflows.py answers an unknown code). */
const requests = vi.hoisted(() => {
  const seen: string[] = [];
  const json = (status: number, body: unknown) =>
    new Response(JSON.stringify(body), { status, headers: { "Content-Type": "application/json" } });
  globalThis.fetch = ((input: RequestInfo | URL, init?: RequestInit) => {
    const request = input instanceof Request ? input : new Request(input, init);
    const path = new URL(request.url).pathname;
    seen.push(path);
    if (path === "/api/v1/me") return Promise.resolve(json(200, { name: "ann", admin: true, projects: [] }));
    const code = /^\/api\/v1\/workflows\/([^/]+)$/.exec(path)?.[1] ?? "";
    return Promise.resolve(json(404, { error: { message: `workflow ${code} not found` } }));
  }) as typeof fetch;
  return seen;
});

function show(address: string) {
  const client = new QueryClient({ defaultOptions: { queries: { retry: false } } });
  render(
    <QueryClientProvider client={client}>
      <MemoryRouter initialEntries={[address]}>
        <Routes>
          <Route path="/workflows/:code" element={<WorkflowPage />} />
        </Routes>
      </MemoryRouter>
    </QueryClientProvider>,
  );
}

afterEach(() => {
  cleanup();
  requests.length = 0;
});

describe("WorkflowPage", () => {
  it("says a word is not a workflow code, asking the API nothing (no NaN)", () => {
    show("/workflows/abc");
    expect(screen.getByRole("alert").textContent).toMatch(/“abc” is not a workflow number/);
    expect(document.body.textContent).not.toMatch(/NaN/);
    expect(requests.filter((p) => p.startsWith("/api/v1/workflows"))).toEqual([]);
  });

  it("says No such workflow for a code the API does not know", async () => {
    show("/workflows/999");
    expect(await screen.findByRole("heading", { name: "No such workflow" })).toBeTruthy();
    expect(screen.getByRole("alert").textContent).toMatch(/No workflow has the code 999/);
  });
});
