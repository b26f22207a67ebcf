import { QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { act, cleanup, fireEvent, render, screen, waitFor } from "@testing-library/react";
import { createMemoryRouter, RouterProvider } from "react-router";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";

import { setDisplayZone } from "../components/time";
import { Instances } from "./Instances";

/** A fake API answering as engine/api does; it keeps the query of every instances request. */
const server = vi.hoisted(() => {
  const state = { lists: [] as URLSearchParams[], searches: [] as string[] };
  const json = (body: unknown) =>
    new Response(JSON.stringify(body), { status: 200, headers: { "Content-Type": "application/json" } });
  globalThis.fetch = (async (input: RequestInfo | URL, init?: RequestInit) => {
    const request = input instanceof Request ? input : new Request(input, init);
    const url = new URL(request.url);
    if (url.pathname === "/api/v1/instances") {
      state.lists.push(url.searchParams);
      return json({ page: 1, size: 50, total: 0, items: [], total_capped: false, next_before: null });
    }
    if (url.pathname === "/api/v1/workflows") {
      const search = url.searchParams.get("search") ?? "";
      state.searches.push(search);
      const all = ["nightly", "nightly_export", "hourly"].filter((n) => n.includes(search));
      return json({
        page: 1,
        size: 20,
        total: all.length,
        items: all.map((name, i) => ({ code: i + 1, name })),
      });
    }
    if (url.pathname === "/api/v1/projects")
      return json({ page: 1, size: 500, total: 2, items: [{ name: "etl" }, { name: "ux" }] });
    if (url.pathname === "/api/v1/me") return json({ user: "root", admin: true, projects: [] });
    if (url.pathname === "/api/v1/live") return new Response("", { status: 404 });
    return new Response("{}", { status: 404 });
  }) as typeof fetch;
  return state;
});

function show(at: string) {
  const router = createMemoryRouter([{ path: "/instances", element: <Instances /> }], {
    initialEntries: [at],
  });
  const client = new QueryClient({ defaultOptions: { queries: { retry: false } } });
  render(
    <QueryClientProvider client={client}>
      <RouterProvider router={router} />
    </QueryClientProvider>,
  );
  return router;
}

const last = () => server.lists[server.lists.length - 1];

beforeEach(() => act(() => setDisplayZone("UTC")));
afterEach(() => {
  cleanup();
  server.lists = [];
  server.searches = [];
});

describe("instance filters", () => {
  it("sends every filter the address holds, and shows them (a reload or a shared link keeps them)", async () => {
    show(
      "/instances?workflow_name=nightly&project=etl&run_type=backfill&host=m1:5678&state=FAILURE" +
        "&schedule_since=2026-03-01T00:00:00Z&schedule_until=2026-03-08T00:00:00Z",
    );
    await waitFor(() => expect(server.lists.length).toBeGreaterThan(0));
    expect(Object.fromEntries(last()!)).toMatchObject({
      workflow_name: "nightly",
      project: "etl",
      run_type: "backfill",
      host: "m1:5678",
      state: "FAILURE",
      schedule_since: "2026-03-01T00:00:00Z",
      schedule_until: "2026-03-08T00:00:00Z",
    });
    expect((screen.getByLabelText("Filter by workflow name") as HTMLInputElement).value).toBe("nightly");
    await waitFor(() =>
      expect((screen.getByLabelText("Filter by project") as HTMLSelectElement).value).toBe("etl"),
    );
    expect((screen.getByLabelText("Filter by run type") as HTMLSelectElement).value).toBe("backfill");
    expect((screen.getByLabelText("Filter by host") as HTMLInputElement).value).toBe("m1:5678");
    expect((screen.getByLabelText("Business date from") as HTMLInputElement).value).toBe("2026-03-01 00:00");
    expect((screen.getByLabelText("Business date to") as HTMLInputElement).value).toBe("2026-03-08 00:00");
  });

  it("completes workflow names from the workflows the caller sees, and keeps the pick in the URL", async () => {
    const router = show("/instances");
    const field = screen.getByLabelText("Filter by workflow name");
    fireEvent.change(field, { target: { value: "night" } });
    await waitFor(() => expect(server.searches).toContain("night"));
    await waitFor(() =>
      expect(
        [...screen.getByTestId("workflow-names").querySelectorAll("option")].map((o) => o.value),
      ).toEqual(["nightly", "nightly_export"]),
    );
    fireEvent.change(field, { target: { value: "nightly" } });
    fireEvent.keyDown(field, { key: "Enter" });
    await waitFor(() => expect(router.state.location.search).toBe("?workflow_name=nightly"));
    await waitFor(() => expect(last()!.get("workflow_name")).toBe("nightly"));
  });

  it("reads business dates in the display zone and keeps the UTC instant in the URL", async () => {
    act(() => setDisplayZone("Asia/Shanghai"));
    const router = show("/instances");
    expect(screen.getByText(/Business date from \(UTC\+8\)/)).toBeTruthy();
    const from = screen.getByLabelText("Business date from");
    fireEvent.change(from, { target: { value: "2026-03-01 08:00" } });
    fireEvent.keyDown(from, { key: "Enter" });
    await waitFor(() =>
      expect(new URLSearchParams(router.state.location.search).get("schedule_since")).toBe(
        "2026-03-01T00:00:00Z",
      ),
    );
    await waitFor(() => expect(last()!.get("schedule_since")).toBe("2026-03-01T00:00:00Z"));
  });

  it("says a bad value at its field and never sends it", async () => {
    const router = show("/instances?workflow=abc&schedule_until=NaN&run_type=complement");
    await waitFor(() => expect(server.lists.length).toBeGreaterThan(0));
    for (const query of server.lists) {
      expect(query.has("workflow")).toBe(false);
      expect(query.has("schedule_until")).toBe(false);
      expect(query.has("run_type")).toBe(false);
    }
    expect(screen.getAllByRole("alert").map((a) => a.textContent)).toEqual(
      expect.arrayContaining([
        expect.stringContaining("a workflow code is a number"),
        expect.stringContaining("“NaN” is not a date"),
      ]),
    );
    const from = screen.getByLabelText("Business date from");
    fireEvent.change(from, { target: { value: "2026-02-30" } });
    fireEvent.keyDown(from, { key: "Enter" });
    expect(screen.getByText(/“2026-02-30” is not a date/)).toBeTruthy();
    expect(from.getAttribute("aria-invalid")).toBe("true");
    expect(new URLSearchParams(router.state.location.search).has("schedule_since")).toBe(false);
  });

  it("offers the run types the API knows and clears every filter at once", async () => {
    const router = show("/instances?run_type=rerun&host=m1:5678");
    const options = [...(screen.getByLabelText("Filter by run type") as HTMLSelectElement).options].map(
      (o) => o.value,
    );
    expect(options).toEqual(["", "manual", "scheduled", "backfill", "rerun", "recovery"]);
    fireEvent.click(screen.getByRole("button", { name: "Clear filters" }));
    await waitFor(() => expect(router.state.location.search).toBe(""));
    expect((screen.getByLabelText("Filter by host") as HTMLInputElement).value).toBe("");
  });
});
