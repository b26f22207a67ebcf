import { QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { cleanup, fireEvent, render, screen, waitFor, within } from "@testing-library/react";
import { MemoryRouter } from "react-router";
import { afterEach, describe, expect, it, vi } from "vitest";

import { ResourcesPage } from "./Resources";

/** A fake API server with one project's resource center, answering as engine/api/resources.py does. */
const server = vi.hoisted(() => {
  type Version = {
    version: number;
    size: number;
    sha256: string;
    description: string | null;
    restored_from: number | null;
  };
  const state = {
    files: new Map<string, Version[]>(),
    used: new Map<string, string>(),
    restores: [] as unknown[],
  };
  const json = (status: number, body: unknown) =>
    new Response(JSON.stringify(body), { status, headers: { "Content-Type": "application/json" } });
  const refuse = (status: number, message: string, field?: string) =>
    json(status, { error: { message, field } });
  const handle = async (request: Request): Promise<Response> => {
    const url = new URL(request.url);
    const path = url.pathname;
    const q = url.searchParams;
    if (request.method === "GET" && path === "/api/v1/projects")
      return json(200, { items: [{ name: "etl" }], page: 1, size: 200, total: 1 });
    const base = "/api/v1/projects/etl/resources";
    if (request.method === "GET" && path === base) {
      const folder = q.get("folder") ?? "";
      const prefix = folder ? `${folder}/` : "";
      const folders = new Map<string, { name: string; path: string; files: number; size: number }>();
      const files = [];
      for (const [name, versions] of state.files) {
        if (!name.startsWith(prefix)) continue;
        const rest = name.slice(prefix.length);
        const head = rest.split("/")[0] ?? "";
        const latest = versions.at(-1)!;
        if (rest.includes("/")) {
          const f = folders.get(head) ?? { name: head, path: prefix + head, files: 0, size: 0 };
          f.files += 1;
          f.size += latest.size;
          folders.set(head, f);
        } else
          files.push({
            ...latest,
            path: name,
            name: rest,
            versions: versions.length,
            create_time: "2026-11-26T20:00:00Z",
          });
      }
      return json(200, {
        folder,
        folders: [...folders.values()],
        files,
        usage: 2048,
        limit: 1 << 30,
        max_file_bytes: 1 << 20,
      });
    }
    const name = q.get("path") ?? "";
    if (request.method === "GET" && path === `${base}/versions`)
      return json(200, {
        path: name,
        versions: [...(state.files.get(name) ?? [])].reverse().map((v) => ({ ...v, path: name })),
      });
    if (request.method === "GET" && path === `${base}/references`) {
      const user = state.used.get(name);
      return json(200, {
        path: name,
        references: user
          ? [{ workflow: user, code: 7, workflow_version: 1, task: "run", path: name, version: 1 }]
          : [],
      });
    }
    if (request.method === "POST" && path === `${base}/restore`) {
      const body = (await request.json()) as { path: string; version: number };
      state.restores.push(body);
      const versions = state.files.get(body.path)!;
      const old = versions.find((v) => v.version === body.version)!;
      versions.push({ ...old, version: versions.length + 1, restored_from: body.version, description: null });
      return json(201, { path: body.path, version: versions.length });
    }
    if (request.method === "DELETE" && path === base) {
      const user = state.used.get(name);
      if (user)
        return refuse(
          409,
          `resource '${name}' is used by workflow(s) etl/${user} (version 1): change them first`,
          "query.path",
        );
      state.files.delete(name);
      return json(200, { deleted: [name], versions: 1 });
    }
    return refuse(404, `no route ${request.method} ${path}`);
  };
  globalThis.fetch = ((input: RequestInfo | URL, init?: RequestInit) =>
    handle(input instanceof Request ? input : new Request(input, init))) as typeof fetch;
  return state;
});

function show(at: string) {
  const client = new QueryClient({ defaultOptions: { queries: { retry: false } } });
  render(
    <QueryClientProvider client={client}>
      <MemoryRouter initialEntries={[at]}>
        <ResourcesPage />
      </MemoryRouter>
    </QueryClientProvider>,
  );
}

const v = (version: number, size: number, description: string | null = null) => ({
  version,
  size,
  sha256: `${version}`.repeat(64),
  description,
  restored_from: null,
});

afterEach(() => {
  cleanup();
  server.files.clear();
  server.used.clear();
  server.restores = [];
});

describe("Resources", () => {
  it("walks the folders, shows a file's versions and users, restores a version", async () => {
    server.files.set("etl/clean.py", [v(1, 10, "first"), v(2, 12)]);
    server.files.set("top.sh", [v(1, 5)]);
    server.used.set("etl/clean.py", "daily");
    show("/resources?project=etl");
    await screen.findByTestId("resource-file-top.sh");
    expect(screen.getByTestId("resource-usage").textContent).toBe("2.0 KiB of 1.0 GiB used");
    fireEvent.click(within(screen.getByTestId("resource-folder-etl")).getByRole("button", { name: "etl/" }));
    fireEvent.click(
      within(await screen.findByTestId("resource-file-etl/clean.py")).getByRole("button", {
        name: "clean.py",
      }),
    );
    const detail = await screen.findByRole("region", { name: "File etl/clean.py" });
    await within(detail).findByTestId("resource-version-1");
    expect(within(detail).getByTestId("resource-version-1").textContent).toContain("first");
    expect(
      (await within(detail).findByText("daily (version 1), task run: pins version 1")).getAttribute("href"),
    ).toBe("/workflows/7");
    expect(within(detail).queryByRole("button", { name: "Restore version 2" })).toBeNull(); // the newest
    fireEvent.click(within(detail).getByRole("button", { name: "Restore version 1" }));
    await within(detail).findByTestId("resource-version-3");
    expect(within(detail).getByTestId("resource-version-3").textContent).toContain("restored from 1");
    expect(server.restores).toEqual([{ path: "etl/clean.py", version: 1 }]);
  });

  it("shows the server's reason when a used file cannot be deleted, and deletes an unused one", async () => {
    server.files.set("used.sh", [v(1, 5)]);
    server.files.set("spare.sh", [v(1, 5)]);
    server.used.set("used.sh", "daily");
    show("/resources?project=etl");
    fireEvent.click(await screen.findByRole("button", { name: "Delete used.sh" }));
    expect((await screen.findByRole("alert")).textContent).toMatch(/used by workflow\(s\) etl\/daily/);
    fireEvent.click(screen.getByRole("button", { name: "Delete spare.sh" }));
    await waitFor(() => expect(screen.queryByTestId("resource-file-spare.sh")).toBeNull());
    expect(screen.getByTestId("resource-file-used.sh")).toBeTruthy();
  });
});
