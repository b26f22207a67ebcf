import { QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { cleanup, render, waitFor } from "@testing-library/react";
import { createMemoryRouter, RouterProvider } from "react-router";
import { afterEach, beforeAll, describe, expect, it, vi } from "vitest";

import { token } from "../api/client";
import { routes } from "../app/router";

/** A fake API server (installed before the client is made: it keeps the fetch it finds) recording every path
 * asked: a signed-in admin, no task types, anything else unknown (404); a Web Worker that never answers (the
 * graph layout's, which happy-dom lacks). */
const asked = vi.hoisted(() => {
  globalThis.Worker = class {
    onmessage = null;
    postMessage() {}
    terminate() {}
    addEventListener() {}
    removeEventListener() {}
  } as unknown as typeof Worker;
  const paths: string[] = [];
  const json = (status: number, body: unknown) =>
    new Response(JSON.stringify(body), { status, headers: { "Content-Type": "application/json" } });
  globalThis.fetch = ((input: RequestInfo | URL, init?: RequestInit) => {
    const request = input instanceof Request ? input : new Request(input, init);
    const path = new URL(request.url).pathname;
    paths.push(path);
    if (path === "/api/v1/me") return Promise.resolve(json(200, { user: "ann", admin: true, projects: [] }));
    if (path === "/api/v1/task-types") return Promise.resolve(json(200, { items: [] }));
    return Promise.resolve(json(404, { error: { message: `${path} not found` } }));
  }) as typeof fetch;
  return paths;
});

beforeAll(() => token.set("a-token"));
afterEach(() => {
  cleanup();
  asked.length = 0;
});

describe("the editor of a new workflow (/workflows/new)", () => {
  it("asks for no stored workflow (no workflow 0)", async () => {
    const client = new QueryClient({ defaultOptions: { queries: { retry: false } } });
    render(
      <QueryClientProvider client={client}>
        <RouterProvider router={createMemoryRouter(routes, { initialEntries: ["/workflows/new"] })} />
      </QueryClientProvider>,
    );
    // the editor's own questions have been asked (its task types), and every query has settled
    await waitFor(() => expect(asked).toContain("/api/v1/task-types"));
    await waitFor(() => expect(client.isFetching()).toBe(0));
    expect(asked.filter((p) => /^\/api\/v1\/workflows\/[^/]+/.test(p))).toEqual([]);
  });
});
