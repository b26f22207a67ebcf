import { QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { cleanup, fireEvent, render, screen, within } from "@testing-library/react";
import { createMemoryRouter, RouterProvider } from "react-router";
import { afterEach, describe, expect, it, vi } from "vitest";

import { AlertsPage } from "./Alerts";

/** A fake API answering as engine/api/alerts.py does; it keeps every request's method, path and query. */
const server = vi.hoisted(() => {
  const state = { requests: [] as { method: string; path: string; query: string }[] };
  const json = (body: unknown) =>
    new Response(JSON.stringify(body), { status: 200, headers: { "Content-Type": "application/json" } });
  globalThis.fetch = (async (input: RequestInfo | URL, init?: RequestInit) => {
    const request = input instanceof Request ? input : new Request(input, init);
    const url = new URL(request.url);
    state.requests.push({ method: request.method, path: url.pathname, query: url.search });
    if (url.pathname === "/api/v1/alert-groups")
      return json({
        items: [{ id: 1, name: "ops", senders: [{ id: 7, type: "SLACK", name: "slack" }] }],
        total: 1,
      });
    if (url.pathname === "/api/v1/alerts")
      return json({
        page: 1,
        size: 50,
        total: 1,
        items: [
          {
            id: 5,
            title: "nightly failed",
            alert_type: "PROCESS_INSTANCE_FAILURE",
            status: "EXECUTION_PARTIAL_SUCCESS",
            attempts: 3,
            workflow_instance_id: 42,
            log: '{"delivered": [7], "errors": {"teams": "teams refused the message: HTTP 500: down"}}',
          },
        ],
      });
    if (url.pathname === "/api/v1/alerts/5/resend") return json({ id: 5, status: "WAIT_EXECUTION" });
    return new Response("{}", { status: 404 });
  }) as typeof fetch;
  return state;
});

function show(at: string) {
  const router = createMemoryRouter([{ path: "/alerts", element: <AlertsPage /> }], { initialEntries: [at] });
  const client = new QueryClient({ defaultOptions: { queries: { retry: false } } });
  render(
    <QueryClientProvider client={client}>
      <RouterProvider router={router} />
    </QueryClientProvider>,
  );
  return router;
}

afterEach(() => {
  cleanup();
  server.requests = [];
});

describe("AlertsPage", () => {
  it("asks for the filters in the URL and shows each sender's outcome", async () => {
    show("/alerts?status=EXECUTION_PARTIAL_SUCCESS&instance=42");
    const row = await screen.findByTestId("alert-5");
    const asked = server.requests.find((r) => r.path === "/api/v1/alerts");
    expect(new URLSearchParams(asked?.query).get("status")).toBe("EXECUTION_PARTIAL_SUCCESS");
    expect(new URLSearchParams(asked?.query).get("instance")).toBe("42");
    expect(within(row).getByText("slack: delivered")).toBeTruthy();
    expect(within(row).getByText("teams: failed — teams refused the message: HTTP 500: down")).toBeTruthy();
    expect(within(row).getByRole("link", { name: "42" }).getAttribute("href")).toBe("/instances/42");
  });

  it("keeps a changed filter in the URL, and resends an alert", async () => {
    const router = show("/alerts");
    await screen.findByTestId("alert-5");
    fireEvent.change(screen.getByLabelText("Status"), { target: { value: "EXECUTION_FAILURE" } });
    expect(router.state.location.search).toBe("?status=EXECUTION_FAILURE");
    fireEvent.change(screen.getByLabelText("Instance id"), { target: { value: "42" } });
    fireEvent.blur(screen.getByLabelText("Instance id"));
    expect(new URLSearchParams(router.state.location.search).get("instance")).toBe("42");
    const row = await screen.findByTestId("alert-5"); // the list asked again with the new filters
    fireEvent.click(within(row).getByRole("button", { name: "Resend" }));
    expect((await screen.findByRole("status")).textContent).toBe("Alert 5 queued again for every sender.");
    expect(server.requests.some((r) => r.method === "POST" && r.path === "/api/v1/alerts/5/resend")).toBe(
      true,
    );
  });
});
