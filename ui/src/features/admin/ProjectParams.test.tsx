import { QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { cleanup, fireEvent, render, screen, waitFor, within } from "@testing-library/react";
import { afterEach, describe, expect, it, vi } from "vitest";

import { paramBody, paramFormOf, ProjectParams } from "./ProjectParams";

/** A fake API server holding one project's parameters, answering as engine/api/project_params.py does. */
const server = vi.hoisted(() => {
  const state = { params: new Map<string, { value: string; secret: boolean }>(), puts: [] as unknown[] };
  const json = (status: number, body: unknown) =>
    new Response(JSON.stringify(body), { status, headers: { "Content-Type": "application/json" } });
  const refuse = (status: number, message: string, field?: string) =>
    json(status, { error: { message, field } });
  const handle = async (request: Request): Promise<Response> => {
    const path = new URL(request.url).pathname;
    const page = (items: unknown[]) => json(200, { items, page: 1, size: 500, total: items.length });
    if (request.method === "GET" && path === "/api/v1/projects") return page([{ name: "etl" }]);
    if (request.method === "GET" && path === "/api/v1/projects/etl/parameters")
      return page(
        [...state.params].map(([name, p]) => ({
          name,
          value: p.secret ? "***" : p.value,
          secret: p.secret,
          update_time: "2026-11-26T20:00:00Z",
        })),
      );
    const one = /^\/api\/v1\/projects\/etl\/parameters\/([^/]+)$/.exec(path);
    const name = decodeURIComponent(one?.[1] ?? "");
    if (request.method === "PUT" && one) {
      const body = (await request.json()) as { value: string; secret?: boolean };
      state.puts.push({ name, ...body });
      if (name.startsWith("system."))
        return refuse(400, "system.* names are built-in parameters, which cannot be set", "path.param");
      const old = state.params.get(name);
      const secret = body.secret ?? old?.secret ?? false;
      state.params.set(name, {
        value: secret && body.value === "***" ? (old?.value ?? "") : body.value,
        secret,
      });
      return json(200, { name, value: secret ? "***" : body.value, secret });
    }
    if (request.method === "DELETE" && one) {
      state.params.delete(name);
      return json(200, { deleted: name });
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
      <ProjectParams />
    </QueryClientProvider>,
  );
}

afterEach(() => {
  cleanup();
  server.params.clear();
  server.puts = [];
});

describe("ProjectParams", () => {
  it("creates a secret parameter (a built-in name refused at the field), masked, and an edit keeps the secret", async () => {
    show();
    await screen.findByRole("option", { name: "etl" });
    fireEvent.change(screen.getByLabelText("Project"), { target: { value: "etl" } });
    await screen.findByText("No parameter in this project.");
    fireEvent.click(screen.getByRole("button", { name: "New parameter" }));
    const form = screen.getByRole("form", { name: "New project parameter" });
    const name = within(form).getByLabelText("Parameter name");
    fireEvent.change(name, { target: { value: "system.datetime" } });
    fireEvent.change(within(form).getByLabelText("Value"), { target: { value: "s3cret" } });
    fireEvent.click(within(form).getByLabelText("Secret (sealed at rest, shown as ***)"));
    expect(within(form).getByLabelText("Value").getAttribute("type")).toBe("password");
    fireEvent.click(within(form).getByRole("button", { name: "Save" }));
    await waitFor(() => expect(name.getAttribute("aria-invalid")).toBe("true"));
    expect(within(form).getByRole("alert").textContent).toMatch(/built-in parameters/);
    fireEvent.change(name, { target: { value: "db_password" } });
    fireEvent.click(within(form).getByRole("button", { name: "Save" }));
    const row = await screen.findByTestId("param-db_password");
    expect(within(row).getByText("***")).toBeTruthy();
    expect(row.textContent).not.toContain("s3cret");

    fireEvent.click(within(row).getByRole("button", { name: "Edit" }));
    const edit = screen.getByRole("form", { name: "Edit parameter db_password" });
    expect((within(edit).getByLabelText("Value") as HTMLInputElement).value).toBe("");
    fireEvent.click(within(edit).getByRole("button", { name: "Save" }));
    await waitFor(() =>
      expect(server.puts.at(-1)).toEqual({ name: "db_password", value: "***", secret: true }),
    );
    expect(server.params.get("db_password")).toEqual({ value: "s3cret", secret: true });
  });
});

describe("parameter bodies", () => {
  it("sends the mask only for a stored secret left empty", () => {
    const stored = { name: "p", value: "***", secret: true };
    expect(paramFormOf(stored)).toEqual({ name: "p", value: "", secret: true });
    expect(paramBody(paramFormOf(stored), stored)).toEqual({ value: "***", secret: true });
    expect(paramBody({ name: "p", value: "new", secret: true }, stored)).toEqual({
      value: "new",
      secret: true,
    });
    expect(paramBody({ name: "p", value: "", secret: true }, null)).toEqual({ value: "", secret: true });
    expect(paramFormOf({ name: "q", value: "1", secret: false }).value).toBe("1");
  });
});
