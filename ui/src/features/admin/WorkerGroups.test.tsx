import { QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { cleanup, fireEvent, render, screen, waitFor, within } from "@testing-library/react";
import { afterEach, describe, expect, it, vi } from "vitest";

import { assignedState, workerChoices, WorkerGroups } from "./WorkerGroups";

/** A fake API server with two live workers, answering as engine/api/worker_groups.py does. */
const server = vi.hoisted(() => {
  const live = [
    { address: "10.0.0.1:1234", group: "default" },
    { address: "10.0.0.2:1234", group: "gpu" },
  ];
  const state = {
    groups: new Map<string, { addresses: string[]; description: string | null }>(),
    live,
    bodies: [] as unknown[],
  };
  const json = (status: number, body: unknown) =>
    new Response(JSON.stringify(body), { status, headers: { "Content-Type": "application/json" } });
  const refuse = (status: number, message: string, field?: string) =>
    json(status, { error: { message, field } });
  const out = (name: string) => {
    const g = state.groups.get(name);
    const addresses = g?.addresses ?? [];
    const members = state.live
      .filter((w) => w.group === name || addresses.includes(w.address))
      .map((w) => w.address);
    return { name, addresses, live: members, managed: g !== undefined, description: g?.description ?? null };
  };
  const handle = async (request: Request): Promise<Response> => {
    const path = new URL(request.url).pathname;
    const page = (items: unknown[]) => json(200, { items, page: 1, size: 500, total: items.length });
    if (request.method === "GET" && path === "/api/v1/cluster")
      return json(200, {
        masters: [],
        workers: state.live.map((w) => ({ ...w, status: "NORMAL", heartbeat: {} })),
      });
    if (request.method === "GET" && path === "/api/v1/worker-groups") {
      const names = new Set([...state.groups.keys(), ...state.live.map((w) => w.group)]);
      return page([...names].sort().map(out));
    }
    if (request.method === "POST" && path === "/api/v1/worker-groups") {
      const body = (await request.json()) as { name: string; addresses: string[]; description?: string };
      state.bodies.push(body);
      if (body.name === "default")
        return refuse(
          400,
          "'default' is every worker configured without a group; it cannot be created",
          "name",
        );
      state.groups.set(body.name, { addresses: body.addresses, description: body.description ?? null });
      return json(201, out(body.name));
    }
    const one = /^\/api\/v1\/worker-groups\/([^/]+)$/.exec(path);
    if (request.method === "PATCH" && one) {
      const name = decodeURIComponent(one[1] ?? "");
      const body = (await request.json()) as { addresses: string[]; description: string };
      state.bodies.push(body);
      state.groups.set(name, { addresses: body.addresses, description: body.description });
      return json(200, out(name));
    }
    return refuse(404, `no route ${request.method} ${path}`);
  };
  globalThis.fetch = ((input: RequestInfo | URL, init?: RequestInit) =>
    handle(input instanceof Request ? input : new Request(input, init))) as typeof fetch;
  return state;
});

function show() {
  const client = new QueryClient({ defaultOptions: { queries: { retry: false } } });
  render(
    <QueryClientProvider client={client}>
      <WorkerGroups />
    </QueryClientProvider>,
  );
}

afterEach(() => {
  cleanup();
  server.groups.clear();
  server.bodies = [];
});

describe("WorkerGroups", () => {
  it("creates a group of a live worker ('default' refused at the field), shows it live, reassigns it", async () => {
    show();
    expect(
      within(await screen.findByTestId("worker-group-gpu")).getByText("from workers' configuration"),
    ).toBeTruthy();
    fireEvent.click(screen.getByRole("button", { name: "New worker group" }));
    const form = screen.getByRole("form", { name: "New worker group" });
    const name = within(form).getByLabelText("Worker group name");
    fireEvent.change(name, { target: { value: "default" } });
    fireEvent.click(await within(form).findByRole("checkbox", { name: "Assign 10.0.0.1:1234" }));
    fireEvent.click(within(form).getByRole("button", { name: "Save" }));
    await waitFor(() => expect(name.getAttribute("aria-invalid")).toBe("true"));
    expect(within(form).getByRole("alert").textContent).toMatch(/cannot be created/);
    fireEvent.change(name, { target: { value: "etl" } });
    fireEvent.click(within(form).getByRole("button", { name: "Save" }));
    const row = await screen.findByTestId("worker-group-etl");
    expect(server.bodies.at(-1)).toEqual({ name: "etl", addresses: ["10.0.0.1:1234"] });
    expect(within(row).getByText("live")).toBeTruthy();

    fireEvent.click(within(row).getByRole("button", { name: "Edit" }));
    const edit = screen.getByRole("form", { name: "Edit worker group etl" });
    fireEvent.click(within(edit).getByRole("checkbox", { name: "Assign 10.0.0.1:1234" }));
    fireEvent.click(within(edit).getByRole("checkbox", { name: "Assign 10.0.0.2:1234" }));
    fireEvent.click(within(edit).getByRole("button", { name: "Save" }));
    await waitFor(() =>
      expect(server.bodies.at(-1)).toEqual({ addresses: ["10.0.0.2:1234"], description: "" }),
    );
  });
});

describe("worker choices", () => {
  it("offers every live worker and the group's assigned ones that are not live, marked", () => {
    const choices = workerChoices([{ address: "b:1", group: "default" }], ["a:1", "b:1"]);
    expect(choices).toEqual([
      { address: "a:1", live: false, group: null },
      { address: "b:1", live: true, group: "default" },
    ]);
    expect(assignedState({ addresses: ["a:1", "b:1"], live: ["b:1"] })).toEqual([
      { address: "a:1", live: false },
      { address: "b:1", live: true },
    ]);
  });
});
