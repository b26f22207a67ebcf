import { QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { cleanup, fireEvent, render as renderBare, screen } from "@testing-library/react";
import type { ReactElement } from "react";
import { afterEach, describe, expect, it, vi } from "vitest";

import { AlertGroupEditor } from "./AlertGroupEditor";
import type { AlertType } from "./schemaForm";

/** The editor saves through a mutation hook: it needs a query client. */
function render(ui: ReactElement) {
  return renderBare(<QueryClientProvider client={new QueryClient()}>{ui}</QueryClientProvider>);
}

/** The last request body the fake API got, and what it answers (as engine/api/alerts.py does). */
const server = vi.hoisted(() => {
  const state = { bodies: [] as { method: string; path: string; body: unknown }[], refuse: null as unknown };
  globalThis.fetch = (async (input: RequestInfo | URL, init?: RequestInit) => {
    const request = input instanceof Request ? input : new Request(input, init);
    const body: unknown = await request.json();
    state.bodies.push({ method: request.method, path: new URL(request.url).pathname, body });
    const status = state.refuse ? 400 : 200;
    return new Response(JSON.stringify(state.refuse ?? { id: 3, name: "ops", senders: [] }), {
      status,
      headers: { "Content-Type": "application/json" },
    });
  }) as typeof fetch;
  return state;
});

const TYPES: AlertType[] = [
  {
    type: "SLACK",
    summary: "Slack",
    secret: ["webHook"],
    params: {
      properties: {
        webHook: { type: "string", writeOnly: true, format: "password", description: "incoming webhook URL" },
        username: { type: "string", description: "posted as" },
      },
    },
  },
  {
    type: "TEAMS",
    summary: "Teams",
    secret: ["webHook"],
    params: {
      required: ["webHook"],
      properties: { webHook: { type: "string", writeOnly: true, description: "URL" } },
    },
  },
];

afterEach(() => {
  cleanup();
  server.bodies = [];
  server.refuse = null;
});

describe("AlertGroupEditor", () => {
  it("edits a group: keeps a stored secret untouched, adds a sender of another type, removes one", async () => {
    const done = vi.fn();
    const group = {
      id: 3,
      name: "ops",
      senders: [
        { id: 11, type: "SLACK", name: "slack", params: { webHook: "***", username: "pp" } },
        { id: 12, type: "TEAMS", name: "old", params: { webHook: "***" } },
      ],
    };
    render(<AlertGroupEditor group={group} types={TYPES} onDone={done} />);
    const secret = screen.getByLabelText("Sender 1 webHook") as HTMLInputElement;
    expect(secret.type).toBe("password");
    expect(secret.value).toBe("***");
    fireEvent.change(screen.getByLabelText("Sender 1 username"), { target: { value: "porpoise" } });
    fireEvent.click(screen.getAllByRole("button", { name: "Remove sender" })[1]!);
    fireEvent.click(screen.getByRole("button", { name: "Add sender" }));
    fireEvent.change(screen.getByLabelText("Sender 2 Channel type"), { target: { value: "TEAMS" } });
    fireEvent.change(screen.getByLabelText("Sender 2 webHook"), {
      target: { value: "http://127.0.0.1:9/t" },
    });
    fireEvent.click(screen.getByRole("button", { name: "Save" }));
    await vi.waitFor(() => expect(done).toHaveBeenCalledWith(true));
    expect(server.bodies).toEqual([
      {
        method: "PATCH",
        path: "/api/v1/alert-groups/3",
        body: {
          name: "ops",
          description: "",
          senders: [
            { id: 11, type: "SLACK", name: "slack", params: { webHook: "***", username: "porpoise" } },
            { type: "TEAMS", name: "slack2", params: { webHook: "http://127.0.0.1:9/t" } },
          ],
        },
      },
    ]);
  });

  it("shows the server's field error at the sender's field", async () => {
    server.refuse = {
      error: {
        status: 400,
        message: "must be an http:// or https:// URL",
        field: "senders[0].params.webHook",
      },
    };
    render(<AlertGroupEditor types={TYPES} onDone={vi.fn()} />);
    fireEvent.change(screen.getByLabelText("Alert group name"), { target: { value: "new" } });
    fireEvent.click(screen.getByRole("button", { name: "Add sender" }));
    fireEvent.change(screen.getByLabelText("Sender 1 webHook"), { target: { value: "ftp://x" } });
    fireEvent.click(screen.getByRole("button", { name: "Create alert group" }));
    const error = await screen.findByRole("alert");
    expect(error.textContent).toBe("must be an http:// or https:// URL");
    expect(screen.getByLabelText("Sender 1 webHook").getAttribute("aria-invalid")).toBe("true");
    expect(server.bodies[0]?.method).toBe("POST");
  });
});
