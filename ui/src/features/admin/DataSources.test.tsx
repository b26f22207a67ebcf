import { QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { cleanup, fireEvent, render, screen, waitFor, within } from "@testing-library/react";
import { afterEach, describe, expect, it, vi } from "vitest";

import { installFocusInvalid } from "../../components/focusInvalid";
import { DataSources } from "./DataSources";

/** A fake API server holding data sources, answering as engine/api/datasources.py does. */
const server = vi.hoisted(() => {
  const state = {
    sources: new Map<string, { type: string; params: Record<string, unknown> }>(),
    puts: [] as { name: string; body: { type: string; params: Record<string, unknown> } }[],
  };
  const json = (status: number, body: unknown) =>
    new Response(JSON.stringify(body), { status, headers: { "Content-Type": "application/json" } });
  const refuse = (status: number, message: string, field?: string) =>
    json(status, { error: { message, field } });
  const shown = (name: string) => {
    const s = state.sources.get(name)!;
    const params = Object.fromEntries(
      Object.entries(s.params).map(([k, v]) => [k, k === "password" ? "***" : v]),
    );
    return { name, type: s.type, params, note: null };
  };
  const handle = async (request: Request): Promise<Response> => {
    const path = new URL(request.url).pathname;
    const page = (items: unknown[]) => json(200, { items, page: 1, size: 500, total: items.length });
    if (request.method === "GET" && path === "/api/v1/datasources")
      return page([...state.sources.keys()].map(shown));
    if (request.method === "GET" && path === "/api/v1/grants") return page([]);
    if (request.method === "GET" && path === "/api/v1/projects") return page([{ name: "etl" }]);
    const one = /^\/api\/v1\/datasources\/([^/]+)(\/test)?$/.exec(path);
    if (request.method === "PUT" && one) {
      const name = decodeURIComponent(one[1] ?? "");
      const body = (await request.json()) as { type: string; params: Record<string, unknown> };
      if (typeof body.params.host === "string" && !/^[A-Za-z0-9_.:-]*$/.test(body.params.host))
        return refuse(400, "does not match '^[A-Za-z0-9_.:\\[\\]-]*$'", "params.host");
      state.puts.push({ name, body });
      const old = state.sources.get(name);
      const params = { ...body.params };
      if (params.password === "***") params.password = old?.params.password;
      state.sources.set(name, { type: body.type, params });
      return json(200, shown(name));
    }
    if (request.method === "POST" && one?.[2]) {
      const name = decodeURIComponent(one[1] ?? "");
      const s = state.sources.get(name)!;
      return json(
        200,
        s.params.password === "right"
          ? { name, type: s.type, ok: true, version: "MariaDB 10.11", seconds: 0.05 }
          : { name, type: s.type, ok: false, error: "Access denied for user 'u'@'localhost'", seconds: 0.02 },
      );
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
      <DataSources />
    </QueryClientProvider>,
  );
}

afterEach(() => {
  cleanup();
  server.sources.clear();
  server.puts = [];
});

describe("DataSources", () => {
  it("creates a MySQL source: the type sets the port, a refused host shows at the field", async () => {
    show();
    fireEvent.click(screen.getByRole("button", { name: "New data source" }));
    const form = screen.getByRole("form", { name: "New data source" });
    fireEvent.change(within(form).getByLabelText("Data source name"), { target: { value: "shop" } });
    fireEvent.change(within(form).getByLabelText("Type"), { target: { value: "MYSQL" } });
    expect((within(form).getByLabelText("Port") as HTMLInputElement).value).toBe("3306");
    expect(within(form).queryByLabelText(/DSN/)).toBeNull(); // POSTGRESQL only
    const host = within(form).getByLabelText("Host");
    fireEvent.change(host, { target: { value: "bad host" } });
    fireEvent.change(within(form).getByLabelText("User"), { target: { value: "u" } });
    fireEvent.change(within(form).getByLabelText("Password"), { target: { value: "right" } });
    fireEvent.click(within(form).getByRole("button", { name: "Save" }));
    await waitFor(() => expect(host.getAttribute("aria-invalid")).toBe("true"));
    expect(within(form).getByRole("alert").textContent).toMatch(/does not match/);
    fireEvent.change(host, { target: { value: "db.local" } });
    fireEvent.click(within(form).getByRole("button", { name: "Save" }));
    await screen.findByTestId("datasource-shop");
    expect(server.puts.at(-1)).toEqual({
      name: "shop",
      body: {
        type: "MYSQL",
        params: { host: "db.local", port: 3306, database: "", user: "u", password: "right" },
      },
    });
    expect(screen.queryByRole("form", { name: "New data source" })).toBeNull();
  });

  it("edits a source keeping its masked password, and tests it: the server's message either way", async () => {
    server.sources.set("shop", {
      type: "MYSQL",
      params: { host: "db", port: 3306, user: "u", password: "wrong" },
    });
    show();
    const row = await screen.findByTestId("datasource-shop");
    fireEvent.click(within(row).getByRole("button", { name: "Test connection" }));
    expect((await within(row).findByText(/^failed:/)).textContent).toBe(
      "failed: Access denied for user 'u'@'localhost'",
    );
    fireEvent.click(within(row).getByRole("button", { name: "Edit" }));
    const form = screen.getByRole("form", { name: "Edit data source shop" });
    expect((within(form).getByLabelText("Password") as HTMLInputElement).value).toBe("");
    expect(within(form).getByText("stored: leave empty to keep it")).toBeTruthy();
    fireEvent.change(within(form).getByLabelText("User"), { target: { value: "u2" } });
    fireEvent.click(within(form).getByRole("button", { name: "Save" }));
    await waitFor(() => expect(server.puts).toHaveLength(1));
    expect(server.puts[0]?.body.params).toMatchObject({ user: "u2", password: "***" });
    expect(server.sources.get("shop")?.params.password).toBe("wrong");
    server.sources.get("shop")!.params.password = "right";
    fireEvent.click(
      within(await screen.findByTestId("datasource-shop")).getByRole("button", { name: "Test connection" }),
    );
    expect((await screen.findByText(/^connected:/)).textContent).toBe("connected: MariaDB 10.11 (0.05 s)");
  });

  it("moves focus to the field the server refused (as in every form of the app: Layout installs the watch)", async () => {
    const stop = installFocusInvalid();
    try {
      show();
      fireEvent.click(screen.getByRole("button", { name: "New data source" }));
      const form = screen.getByRole("form", { name: "New data source" });
      fireEvent.change(within(form).getByLabelText("Data source name"), { target: { value: "shop2" } });
      fireEvent.change(within(form).getByLabelText("Type"), { target: { value: "MYSQL" } });
      const host = within(form).getByLabelText("Host");
      fireEvent.change(host, { target: { value: "bad host" } });
      const save = within(form).getByRole("button", { name: "Save" });
      save.focus();
      fireEvent.click(save);
      await waitFor(() => expect(host.getAttribute("aria-invalid")).toBe("true"));
      await waitFor(() => expect(document.activeElement).toBe(host));
    } finally {
      stop();
    }
  });
});
