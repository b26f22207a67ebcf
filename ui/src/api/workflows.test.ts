import { afterEach, describe, expect, it, vi } from "vitest";

import { followCommand } from "./workflows";

/** A fake API server (installed before the client is made: it keeps the fetch it finds) answering GET
 * /api/v1/commands/{id} with the next of ``answers`` (as engine/api/commands.py does). */
const server = vi.hoisted(() => {
  const state = { answers: [] as unknown[], asked: 0 };
  globalThis.fetch = (() => {
    state.asked += 1;
    const body = state.answers.shift() ?? { status: "QUEUED", workflow_instance_id: null, message: null };
    return Promise.resolve(
      new Response(JSON.stringify(body), { status: 200, headers: { "Content-Type": "application/json" } }),
    );
  }) as typeof fetch;
  return state;
});

const noWait = () => Promise.resolve();

afterEach(() => {
  server.answers = [];
  server.asked = 0;
});

describe("followCommand", () => {
  it("answers the instance a master made of the command", async () => {
    server.answers = [
      { command_id: 11, status: "QUEUED", workflow_instance_id: null, message: null },
      { command_id: 11, status: "STARTED", workflow_instance_id: 42, message: null },
    ];
    expect(await followCommand(11, noWait)).toEqual({ instance: 42 });
    expect(server.asked).toBe(2);
  });

  it("answers a refusal with the master's message", async () => {
    server.answers = [
      { command_id: 11, status: "ERROR", workflow_instance_id: null, message: "no such tenant" },
    ];
    expect(await followCommand(11, noWait)).toEqual({ refused: "no such tenant" });
  });

  it("gives up after 100 questions: still queued (no master claimed it)", async () => {
    expect(await followCommand(11, noWait)).toEqual({ queued: 11 });
    expect(server.asked).toBe(100);
  });
});
