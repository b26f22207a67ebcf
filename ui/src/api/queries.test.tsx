import { QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { cleanup, render, screen, waitFor } from "@testing-library/react";
import { afterEach, describe, expect, it, vi } from "vitest";

import { useWorkflow } from "./queries";

function Probe({ code }: { code: number | null }) {
  const query = useWorkflow(code);
  return <p>{query.data ? `loaded ${query.data.name}` : query.fetchStatus}</p>;
}

/** A fake API server (installed before the client is made: it keeps the fetch it finds) recording the paths
 * it was asked for. */
const asked = vi.hoisted(() => {
  const paths: string[] = [];
  globalThis.fetch = ((input: RequestInfo | URL, init?: RequestInit) => {
    const request = input instanceof Request ? input : new Request(input, init);
    paths.push(new URL(request.url).pathname);
    return Promise.resolve(
      new Response(JSON.stringify({ code: 7, name: "daily", version: 1, document: {} }), {
        status: 200,
        headers: { "Content-Type": "application/json" },
      }),
    );
  }) as typeof fetch;
  return paths;
});

function show(code: number | null) {
  const client = new QueryClient({ defaultOptions: { queries: { retry: false } } });
  render(
    <QueryClientProvider client={client}>
      <Probe code={code} />
    </QueryClientProvider>,
  );
}

describe("useWorkflow", () => {
  afterEach(() => {
    cleanup();
    asked.length = 0;
  });

  it("fetches nothing for a new workflow (no code)", async () => {
    show(null);
    await screen.findByText("idle");
    expect(asked).toEqual([]);
  });

  it("fetches the workflow it is given", async () => {
    show(7);
    await screen.findByText("loaded daily");
    await waitFor(() => expect(asked).toEqual(["/api/v1/workflows/7"]));
  });
});
