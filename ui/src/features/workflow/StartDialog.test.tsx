import { QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { cleanup, fireEvent, render, screen, waitFor, within } from "@testing-library/react";
import { useState } from "react";
import { MemoryRouter, Route, Routes } from "react-router";
import { afterEach, describe, expect, it, vi } from "vitest";

import type { WorkflowDetail } from "../../api/client";
import { declaredRows, initialForm, startBody } from "./startForm";
import { StartDialog } from "./StartDialog";

/** A fake API server answering as engine/api/workflow_start.py, worker_groups.py and alerts.py do. */
const server = vi.hoisted(() => {
  const state = { starts: [] as unknown[] };
  const json = (status: number, body: unknown) =>
    new Response(JSON.stringify(body), { status, headers: { "Content-Type": "application/json" } });
  const page = (items: unknown[]) => json(200, { items, page: 1, size: 500, total: items.length });
  const handle = async (request: Request): Promise<Response> => {
    const path = new URL(request.url).pathname;
    if (request.method === "GET" && path === "/api/v1/worker-groups")
      return page([
        { name: "default", addresses: [], live: ["w1:1234"], managed: false, description: null },
        { name: "gpu", addresses: ["w2:1234"], live: [], managed: true, description: null },
      ]);
    if (request.method === "GET" && path === "/api/v1/alert-groups")
      return page([{ id: 3, name: "oncall", senders: [] }]);
    if (request.method === "POST" && path === "/api/v1/workflows/7/start") {
      const body = (await request.json()) as { params?: Record<string, string> };
      state.starts.push(body);
      if (body.params?.region === "!raw")
        return json(400, {
          error: { message: "task 'load' uses it as raw SQL text", field: "params.region" },
        });
      return json(201, { command_id: 11, status: "QUEUED", workflow_instance_id: null, message: null });
    }
    if (request.method === "GET" && path === "/api/v1/commands/11")
      return json(200, { command_id: 11, status: "STARTED", workflow_instance_id: 42, message: null });
    return json(404, { error: { message: `no route ${request.method} ${path}` } });
  };
  globalThis.fetch = ((input: RequestInfo | URL, init?: RequestInit) =>
    handle(input instanceof Request ? input : new Request(input, init))) as typeof fetch;
  return state;
});

const WORKFLOW = {
  code: 7,
  name: "etl",
  project: "ux",
  version: 1,
  release_state: "ONLINE",
  update_time: "2026-11-26T10:00:00Z",
  document: {
    name: "etl",
    project: "ux",
    params: [
      { prop: "dt", value: "$[yyyyMMdd]" },
      { prop: "region", value: "eu" },
    ],
    tasks: [
      { name: "extract", type: "SHELL", params: {} },
      { name: "load", type: "SHELL", params: {}, upstream: ["extract"] },
    ],
  },
} as unknown as WorkflowDetail;

function Page() {
  const [open, setOpen] = useState(false);
  return (
    <>
      <button onClick={() => setOpen(true)}>Start…</button>
      {open && <StartDialog workflow={WORKFLOW} onClose={() => setOpen(false)} />}
    </>
  );
}

function show() {
  const client = new QueryClient({ defaultOptions: { queries: { retry: false } } });
  render(
    <QueryClientProvider client={client}>
      <MemoryRouter initialEntries={["/workflows/7"]}>
        <Routes>
          <Route path="/workflows/7" element={<Page />} />
          <Route path="/instances/:id" element={<p>instance page</p>} />
        </Routes>
      </MemoryRouter>
    </QueryClientProvider>,
  );
  const opener = screen.getByRole("button", { name: "Start…" });
  opener.focus();
  fireEvent.click(opener);
  return { opener, dialog: screen.getByRole("dialog", { name: /Start the workflow/ }) };
}

afterEach(() => {
  cleanup();
  server.starts = [];
});

describe("StartDialog", () => {
  it("is a modal dialog: focus moves into it, Escape closes it and gives focus back", () => {
    const { opener, dialog } = show();
    expect(dialog.getAttribute("aria-modal")).toBe("true");
    expect(dialog.contains(document.activeElement)).toBe(true);
    fireEvent.keyDown(document.activeElement ?? dialog, { key: "Escape" });
    expect(screen.queryByRole("dialog")).toBeNull();
    expect(document.activeElement).toBe(opener);
  });

  it("pre-fills the declared parameters, refuses an undeclared one at its row, sends every option", async () => {
    const { dialog } = show();
    const d = within(dialog);
    expect((d.getByLabelText("Value of dt") as HTMLInputElement).value).toBe("$[yyyyMMdd]");
    expect((d.getByLabelText("Value of region") as HTMLInputElement).value).toBe("eu");
    fireEvent.change(d.getByLabelText("Value of region"), { target: { value: "us" } });

    fireEvent.click(d.getByRole("button", { name: "Add a parameter" }));
    const name = d.getByLabelText("Name of parameter row 3");
    fireEvent.change(name, { target: { value: "regoin" } });
    fireEvent.change(d.getByLabelText("Value of parameter row 3"), { target: { value: "x" } });
    fireEvent.click(d.getByRole("button", { name: "Start now" }));
    expect(name.getAttribute("aria-invalid")).toBe("true");
    expect(within(d.getByTestId("start-param-2")).getByRole("alert").textContent).toMatch(
      /not a global parameter of this workflow: a start sets only dt, region/,
    );
    expect(server.starts).toEqual([]);
    fireEvent.click(d.getByRole("button", { name: "Remove parameter row 3" }));

    fireEvent.change(d.getByLabelText("Failure strategy"), { target: { value: "CONTINUE" } });
    await d.findByRole("option", { name: "gpu (no live worker)" });
    fireEvent.change(d.getByLabelText("Worker group"), { target: { value: "gpu" } });
    fireEvent.change(d.getByLabelText("Notify"), { target: { value: "FAILURE" } });
    await d.findByRole("option", { name: "oncall" });
    fireEvent.change(d.getByLabelText("Alert group"), { target: { value: "3" } });
    fireEvent.change(d.getByLabelText("Priority"), { target: { value: "HIGH" } });
    fireEvent.click(d.getByLabelText(/Dry run/));
    expect((d.getByLabelText("With") as HTMLSelectElement).disabled).toBe(true);
    fireEvent.click(d.getByRole("checkbox", { name: "Start from load" }));
    fireEvent.change(d.getByLabelText("With"), { target: { value: "TASK_ONLY" } });
    fireEvent.click(d.getByRole("button", { name: "Start now" }));

    expect(await screen.findByText("instance page")).toBeTruthy();
    expect(server.starts).toEqual([
      {
        params: { region: "us" },
        failure_strategy: "CONTINUE",
        worker_group: "gpu",
        warning_type: "FAILURE",
        warning_group_id: 3,
        priority: "HIGH",
        dry_run: true,
        start_tasks: ["load"],
        scope: "TASK_ONLY",
      },
    ]);
  });

  it("shows the server's refusal of a parameter at its row, and clears it once the value changes", async () => {
    const { dialog } = show();
    const d = within(dialog);
    const region = d.getByLabelText("Value of region");
    fireEvent.change(region, { target: { value: "!raw" } });
    fireEvent.click(d.getByRole("button", { name: "Start now" }));
    await waitFor(() => expect(region.getAttribute("aria-invalid")).toBe("true"));
    expect(within(d.getByTestId("start-param-1")).getByRole("alert").textContent).toMatch(/raw SQL text/);
    expect(server.starts).toEqual([
      {
        params: { region: "!raw" },
        failure_strategy: "END",
        worker_group: "default",
        warning_type: "NONE",
        priority: "MEDIUM",
        dry_run: false,
      },
    ]);
    fireEvent.change(region, { target: { value: "eu" } });
    expect(region.getAttribute("aria-invalid")).toBe("false");
    expect(d.queryByRole("alert")).toBeNull();
  });
});

describe("start form", () => {
  it("reads global parameters from a list or a map, and sends only changed values", () => {
    expect(declaredRows({ a: 1, b: "x" })).toEqual([
      { prop: "a", value: "1", declared: "1" },
      { prop: "b", value: "x", declared: "x" },
    ]);
    const form = initialForm([{ prop: "a", value: "1" }]);
    expect(startBody(form)).toEqual({
      body: {
        failure_strategy: "END",
        worker_group: "default",
        warning_type: "NONE",
        priority: "MEDIUM",
        dry_run: false,
      },
    });
    form.rows.push({ prop: "a", value: "2" });
    expect("errors" in startBody(form) && startBody(form)).toEqual({ errors: new Map([[1, "given twice"]]) });
  });
});
