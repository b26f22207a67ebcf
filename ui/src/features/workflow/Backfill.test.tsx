import { act, cleanup, fireEvent, render, screen, waitFor } from "@testing-library/react";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";

import { setDisplayZone } from "../../components/time";
import { Backfill } from "./Backfill";

/** A fake API keeping the backfill bodies it was sent. */
const server = vi.hoisted(() => {
  const state = { bodies: [] as Record<string, unknown>[] };
  globalThis.fetch = (async (input: RequestInfo | URL, init?: RequestInit) => {
    const request = input instanceof Request ? input : new Request(input, init);
    state.bodies.push((await request.json()) as Record<string, unknown>);
    return new Response(JSON.stringify({ dates: 2, chains: 1, command_ids: [1] }), {
      status: 200,
      headers: { "Content-Type": "application/json" },
    });
  }) as typeof fetch;
  return state;
});

beforeEach(() => act(() => setDisplayZone("Asia/Shanghai")));
afterEach(() => {
  cleanup();
  act(() => setDisplayZone("UTC"));
});

describe("the backfill range", () => {
  it("is read in the display zone, which its fields name", async () => {
    render(<Backfill code={9} onClose={() => undefined} />);
    fireEvent.change(screen.getByLabelText("From (UTC+8)"), { target: { value: "2026-03-01T08:00" } });
    fireEvent.change(screen.getByLabelText("To (UTC+8)"), { target: { value: "2026-03-02T08:00" } });
    fireEvent.click(screen.getByRole("button", { name: "Queue backfill" }));
    await waitFor(() => expect(server.bodies).toHaveLength(1));
    expect(server.bodies[0]).toMatchObject({ start: "2026-03-01T00:00:00Z", end: "2026-03-02T00:00:00Z" });
  });
});
