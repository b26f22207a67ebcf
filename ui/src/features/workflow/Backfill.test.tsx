import { QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { act, cleanup, fireEvent, render as renderBare, screen, waitFor } from "@testing-library/react";
import type { ReactElement } from "react";
import { afterEach, describe, expect, it, vi } from "vitest";

import { parseDateTime24 } from "../../components/DateTimeInput";
import { setDisplayZone } from "../../components/time";
import { Backfill } from "./Backfill";

/** The backfill is a mutation hook: it needs a query client. */
function render(ui: ReactElement) {
  return renderBare(<QueryClientProvider client={new QueryClient()}>{ui}</QueryClientProvider>);
}

/** A fake API server recording backfill bodies (as engine/api/workflow_start.py answers them). */
const bodies = vi.hoisted(() => {
  const seen: Record<string, unknown>[] = [];
  globalThis.fetch = (async (input: RequestInfo | URL, init?: RequestInit) => {
    const request = input instanceof Request ? input : new Request(input, init);
    seen.push((await request.json()) as Record<string, unknown>);
    return new Response(JSON.stringify({ command_ids: [1], dates: 2, chains: 1 }), {
      status: 201,
      headers: { "Content-Type": "application/json" },
    });
  }) as typeof fetch;
  return seen;
});

afterEach(() => {
  cleanup();
  bodies.length = 0;
  act(() => setDisplayZone("UTC"));
});

describe("Backfill", () => {
  it("takes 24-hour times as text (no 12-hour picker), an unreadable one refused at the field", async () => {
    act(() => setDisplayZone("UTC"));
    render(<Backfill code={7} onClose={() => {}} />);
    const from = screen.getByLabelText(/^From/);
    const to = screen.getByLabelText(/^To/);
    expect(from.getAttribute("type")).not.toBe("datetime-local");
    expect(from.getAttribute("placeholder")).toBe("YYYY-MM-DD HH:MM");
    fireEvent.change(from, { target: { value: "2026-11-01 23:30" } });
    fireEvent.change(to, { target: { value: "2026-11-02 11:30 PM" } });
    expect(to.getAttribute("aria-invalid")).toBe("true");
    expect(screen.getByRole("alert").textContent).toMatch(/not a date and 24-hour time/);
    fireEvent.click(screen.getByRole("button", { name: "Queue backfill" }));
    expect(bodies).toEqual([]);
    fireEvent.change(to, { target: { value: "2026-11-02 23:30" } });
    expect(to.getAttribute("aria-invalid")).toBe("false");
    fireEvent.click(screen.getByRole("button", { name: "Queue backfill" }));
    await waitFor(() => expect(bodies).toHaveLength(1));
    expect(bodies[0]).toEqual({
      start: "2026-11-01T23:30:00Z",
      end: "2026-11-02T23:30:00Z",
      run_mode: "SERIAL",
    });
  });

  it("reads the range in the display zone, which its fields name", async () => {
    act(() => setDisplayZone("Asia/Shanghai"));
    render(<Backfill code={9} onClose={() => undefined} />);
    fireEvent.change(screen.getByLabelText(/^From \(UTC\+8\)/), { target: { value: "2026-03-01 08:00" } });
    fireEvent.change(screen.getByLabelText(/^To \(UTC\+8\)/), { target: { value: "2026-03-02 08:00" } });
    fireEvent.click(screen.getByRole("button", { name: "Queue backfill" }));
    await waitFor(() => expect(bodies).toHaveLength(1));
    expect(bodies[0]).toMatchObject({ start: "2026-03-01T00:00:00Z", end: "2026-03-02T00:00:00Z" });
  });

  it("reads only real dates and 24-hour times", () => {
    expect(parseDateTime24("2026-11-01 00:00")).toEqual(new Date(2026, 10, 1, 0, 0));
    expect(parseDateTime24("2026-11-01T23:59:30")).toEqual(new Date(2026, 10, 1, 23, 59, 30));
    for (const bad of ["2026-11-01 24:00", "2026-02-30 10:00", "11/01/2026 10:00", "2026-11-01 9:00 AM", ""])
      expect(parseDateTime24(bad)).toBeNull();
  });
});
