import { QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { cleanup, fireEvent, render, screen, waitFor, within } from "@testing-library/react";
import { afterEach, describe, expect, it, vi } from "vitest";

import { environmentChanges, Environments, newEnvironmentBody } from "./Environments";

/** A fake API server holding environments, answering as engine/api/environments.py does. */
const server = vi.hoisted(() => {
  type Env = { name: string; config: string; description: string | null; worker_groups: string[] };
  const state = {
    envs: new Map<string, Env>(),
    used: new Set<string>(),
    grants: [] as { id: number; resource: string; project: string | null; user: string | null }[],
    patches: [] as unknown[],
  };
  const json = (status: number, body: unknown) =>
    new Response(JSON.stringify(body), { status, headers: { "Content-Type": "application/json" } });
  const refuse = (status: number, message: string, field?: string) =>
    json(status, { error: { message, field } });
  const out = (e: Env) => ({
    ...e,
    code: 1,
    projects: state.grants.filter((g) => g.resource === e.name && g.project).map((g) => g.project),
  });
  const handle = async (request: Request): Promise<Response> => {
    const path = new URL(request.url).pathname;
    const page = (items: unknown[]) => json(200, { items, page: 1, size: 500, total: items.length });
    if (request.method === "GET" && path === "/api/v1/environments")
      return page([...state.envs.values()].map(out));
    if (request.method === "GET" && path === "/api/v1/worker-groups")
      return page([{ name: "default" }, { name: "spark" }]);
    if (request.method === "GET" && path === "/api/v1/grants") return page(state.grants);
    if (request.method === "GET" && path === "/api/v1/projects") return page([{ name: "etl" }]);
    if (request.method === "POST" && path === "/api/v1/grants") {
      const body = (await request.json()) as { resource: string; project?: string; user?: string };
      const g = {
        id: state.grants.length + 1,
        resource: body.resource,
        project: body.project ?? null,
        user: body.user ?? null,
      };
      state.grants.push(g);
      return json(201, g);
    }
    if (request.method === "POST" && path === "/api/v1/environments") {
      const body = (await request.json()) as Env;
      if (!/^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$/.test(body.name))
        return refuse(400, "does not match the pattern", "name");
      if (state.envs.has(body.name)) return refuse(409, `environment '${body.name}' exists already`, "name");
      const env = {
        name: body.name,
        config: body.config,
        description: body.description ?? null,
        worker_groups: body.worker_groups ?? [],
      };
      state.envs.set(body.name, env);
      return json(201, out(env));
    }
    const one = /^\/api\/v1\/environments\/([^/]+)$/.exec(path);
    const name = decodeURIComponent(one?.[1] ?? "");
    if (request.method === "PATCH" && one) {
      const body = (await request.json()) as Partial<Env>;
      state.patches.push(body);
      const env = { ...state.envs.get(name)!, ...body };
      state.envs.set(name, env);
      return json(200, out(env));
    }
    if (request.method === "DELETE" && one) {
      if (state.used.has(name))
        return refuse(
          409,
          `environment '${name}' is used by workflow(s) etl/load: change them first`,
          "name",
        );
      state.envs.delete(name);
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
      <Environments />
    </QueryClientProvider>,
  );
}

afterEach(() => {
  cleanup();
  server.envs.clear();
  server.used.clear();
  server.grants = [];
  server.patches = [];
});

describe("Environments", () => {
  it("creates one bound to a worker group after a refused name shown at the field, edits it, grants it", async () => {
    show();
    fireEvent.click(screen.getByRole("button", { name: "New environment" }));
    const form = screen.getByRole("form", { name: "New environment" });
    const name = within(form).getByLabelText("Environment name");
    fireEvent.change(name, { target: { value: "spark 3" } });
    fireEvent.change(within(form).getByLabelText("Shell lines"), {
      target: { value: "export SPARK_HOME=/opt/spark" },
    });
    fireEvent.click(await within(form).findByRole("checkbox", { name: "spark" }));
    fireEvent.click(within(form).getByRole("button", { name: "Save" }));
    await waitFor(() => expect(name.getAttribute("aria-invalid")).toBe("true"));
    expect(within(form).getByRole("alert").textContent).toBe("does not match the pattern");
    fireEvent.change(name, { target: { value: "spark3" } });
    fireEvent.click(within(form).getByRole("button", { name: "Save" }));
    const row = await screen.findByTestId("environment-spark3");
    expect(within(row).getByText("export SPARK_HOME=/opt/spark")).toBeTruthy();
    expect(server.envs.get("spark3")?.worker_groups).toEqual(["spark"]);

    fireEvent.click(within(row).getByRole("button", { name: "Edit" }));
    const edit = screen.getByRole("form", { name: "Edit environment spark3" });
    fireEvent.change(within(edit).getByLabelText("Description"), { target: { value: "Spark 3.5" } });
    fireEvent.click(within(edit).getByRole("button", { name: "Save" }));
    await waitFor(() => expect(server.patches).toEqual([{ description: "Spark 3.5" }]));

    fireEvent.change(within(row).getByLabelText("Project to grant spark3 to"), { target: { value: "etl" } });
    fireEvent.click(within(row).getByRole("button", { name: "Grant" }));
    expect(await within(row).findByRole("button", { name: "Revoke spark3 from project etl" })).toBeTruthy();
  });

  it("shows why an environment in use cannot be deleted", async () => {
    server.envs.set("java", {
      name: "java",
      config: "export JAVA_HOME=/j",
      description: null,
      worker_groups: [],
    });
    server.used.add("java");
    show();
    fireEvent.click(
      within(await screen.findByTestId("environment-java")).getByRole("button", { name: "Delete" }),
    );
    expect((await screen.findByRole("alert")).textContent).toMatch(/used by workflow\(s\) etl\/load/);
  });
});

describe("environment bodies", () => {
  it("a new one sends everything; an edit only what changed", () => {
    const form = { name: " e ", config: "export A=1", description: "", groups: ["g"] };
    expect(newEnvironmentBody(form)).toEqual({ name: "e", config: "export A=1", worker_groups: ["g"] });
    const stored = { name: "e", config: "export A=1", description: null, worker_groups: ["g"] };
    expect(environmentChanges(form, stored)).toBeNull();
    expect(environmentChanges({ ...form, groups: [] }, stored)).toEqual({ worker_groups: [] });
    expect(environmentChanges({ ...form, config: "export A=2" }, stored)).toEqual({ config: "export A=2" });
  });
});
