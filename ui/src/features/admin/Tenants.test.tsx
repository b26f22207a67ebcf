import { QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { cleanup, fireEvent, render, screen, waitFor, within } from "@testing-library/react";
import { afterEach, beforeAll, describe, expect, it, vi } from "vitest";

import { loadLocale } from "../../i18n/catalog";
import { setLocale } from "../../i18n";
import { grantIds, Tenants } from "./Tenants";

// the Chinese dictionaries, loaded as the header's switch loads them
beforeAll(() => loadLocale("zh-CN"));

/** A fake API server holding tenants and their grants, answering as engine/api/tenants.py and grants.py do. */
const server = vi.hoisted(() => {
  const state = {
    tenants: new Map<string, { description: string | null; used: boolean }>(),
    grants: [] as { id: number; resource: string; project: string }[],
    nextId: 1,
  };
  const json = (status: number, body: unknown) =>
    new Response(JSON.stringify(body), { status, headers: { "Content-Type": "application/json" } });
  const refuse = (status: number, message: string, field?: string) =>
    json(status, { error: { message, field } });
  const handle = async (request: Request): Promise<Response> => {
    const url = new URL(request.url);
    const path = url.pathname;
    const page = (items: unknown[]) => json(200, { items, page: 1, size: 500, total: items.length });
    if (request.method === "GET" && path === "/api/v1/tenants")
      return page(
        [...state.tenants].map(([name, t]) => ({
          name,
          description: t.description,
          projects: state.grants.filter((g) => g.resource === name).map((g) => g.project),
        })),
      );
    if (request.method === "GET" && path === "/api/v1/grants")
      return page(state.grants.map((g) => ({ ...g, resource_type: "tenant", user: null })));
    if (request.method === "GET" && path === "/api/v1/projects")
      return page([{ name: "etl" }, { name: "reports" }]);
    if (request.method === "POST" && path === "/api/v1/tenants") {
      const body = (await request.json()) as { name: string; description?: string };
      if (state.tenants.has(body.name)) return refuse(409, `tenant '${body.name}' exists already`, "name");
      state.tenants.set(body.name, { description: body.description ?? null, used: false });
      return json(201, { name: body.name, description: body.description ?? null, projects: [] });
    }
    if (request.method === "POST" && path === "/api/v1/grants") {
      const body = (await request.json()) as { resource: string; project: string };
      const grant = { id: state.nextId++, resource: body.resource, project: body.project };
      state.grants.push(grant);
      return json(201, grant);
    }
    const revoke = /^\/api\/v1\/grants\/(\d+)$/.exec(path);
    if (request.method === "DELETE" && revoke) {
      state.grants = state.grants.filter((g) => g.id !== Number(revoke[1]));
      return json(200, { revoked: Number(revoke[1]) });
    }
    const gone = /^\/api\/v1\/tenants\/(.+)$/.exec(path);
    if (request.method === "DELETE" && gone) {
      const name = decodeURIComponent(gone[1] ?? "");
      if (state.tenants.get(name)?.used)
        return refuse(409, `tenant '${name}' is used by workflow(s) etl/load: change them first`, "name");
      state.tenants.delete(name);
      state.grants = state.grants.filter((g) => g.resource !== name);
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
      <Tenants />
    </QueryClientProvider>,
  );
}

const row = (name: string) => screen.findByTestId(`tenant-${name}`);

afterEach(() => {
  cleanup();
  setLocale("en");
  server.tenants.clear();
  server.grants = [];
});

describe("Tenants", () => {
  it("creates a tenant, and shows the API's refusal of a second one of the same name", async () => {
    show();
    fireEvent.change(screen.getByLabelText("Tenant name"), { target: { value: "etl_user" } });
    fireEvent.change(screen.getByLabelText("Tenant description"), { target: { value: "runs ETL" } });
    fireEvent.click(screen.getByRole("button", { name: "Create tenant" }));
    expect(within(await row("etl_user")).getByText("runs ETL")).toBeTruthy();
    fireEvent.change(screen.getByLabelText("Tenant name"), { target: { value: "etl_user" } });
    fireEvent.click(screen.getByRole("button", { name: "Create tenant" }));
    const alert = await screen.findByRole("alert");
    expect(alert.textContent).toMatch(/\(409\).*tenant 'etl_user' exists already — field name/);
  });

  it("grants a tenant to a project and revokes it", async () => {
    server.tenants.set("etl_user", { description: null, used: false });
    show();
    const tenant = await row("etl_user");
    fireEvent.change(within(tenant).getByLabelText("Project to grant etl_user to"), {
      target: { value: "reports" },
    });
    fireEvent.click(within(tenant).getByRole("button", { name: "Grant" }));
    const revoke = await screen.findByRole("button", { name: "Revoke etl_user from reports" });
    expect(server.grants).toEqual([{ id: 1, resource: "etl_user", project: "reports" }]);
    // a granted project is not offered again
    const offered = within(tenant)
      .getAllByRole("option")
      .map((o) => o.textContent);
    expect(offered).toEqual(["project…", "etl"]);
    fireEvent.click(revoke);
    await waitFor(() => expect(screen.queryByRole("button", { name: /Revoke etl_user/ })).toBeNull());
    expect(server.grants).toEqual([]);
  });

  it("shows why a tenant in use cannot be deleted, and deletes one that is not", async () => {
    server.tenants.set("used", { description: null, used: true });
    server.tenants.set("spare", { description: null, used: false });
    show();
    fireEvent.click(within(await row("used")).getByRole("button", { name: "Delete" }));
    expect((await screen.findByRole("alert")).textContent).toMatch(/used by workflow\(s\) etl\/load/);
    fireEvent.click(within(await row("spare")).getByRole("button", { name: "Delete" }));
    await waitFor(() => expect(screen.queryByTestId("tenant-spare")).toBeNull());
    expect(screen.queryByTestId("tenant-used")).not.toBeNull();
  });
});

describe("Tenants in Chinese", () => {
  it("reads every label, heading and button in Simplified Chinese", async () => {
    server.tenants.set("etl_user", { description: null, used: false });
    setLocale("zh-CN");
    show();
    const tenant = await row("etl_user");
    expect(screen.getByRole("heading", { name: "租户管理" })).toBeTruthy();
    expect(screen.getByRole("columnheader", { name: "已授权的项目" })).toBeTruthy();
    expect(screen.getByLabelText("租户编码")).toBeTruthy();
    expect(screen.getByRole("button", { name: "创建租户" })).toBeTruthy();
    expect(within(tenant).getByLabelText("要授予租户 etl_user 的项目")).toBeTruthy();
    expect(within(tenant).getByRole("button", { name: "删除" })).toBeTruthy();
    expect(document.body.textContent).not.toMatch(/Tenant|Grant|Delete/);
  });
});

describe("grantIds", () => {
  it("finds a grant by tenant and project, ignoring grants to users", () => {
    const ids = grantIds([
      { id: 3, resource: "a", project: "p", user: null },
      { id: 4, resource: "a", project: null, user: "u" },
    ]);
    expect([...ids]).toEqual([["a\u0000p", 3]]);
  });
});
