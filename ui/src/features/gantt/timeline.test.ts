import { describe, expect, it } from "vitest";

import { axisOf, barOf } from "./timeline";

describe("timeline", () => {
  const t0 = Date.parse("2026-01-01T00:00:00Z");
  const iso = (ms: number) => new Date(t0 + ms).toISOString();

  it("spans from the first submit to the last end (or now for a running attempt)", () => {
    const attempts = [
      { submit_time: iso(0), start_time: iso(500), end_time: iso(2000) },
      { submit_time: iso(1000), start_time: iso(1200), end_time: null },
      { submit_time: null, start_time: null, end_time: null },
    ];
    const axis = axisOf(attempts, t0 + 5000);
    expect(axis).toEqual({ start: t0, end: t0 + 5000 });
    expect(barOf(attempts[0]!, axis!, t0 + 5000)).toEqual({ queuedFrom: 0, runFrom: 500, runTo: 2000 });
    expect(barOf(attempts[1]!, axis!, t0 + 5000)).toEqual({ queuedFrom: 1000, runFrom: 1200, runTo: 5000 });
    expect(barOf(attempts[2]!, axis!, t0 + 5000)).toEqual({ queuedFrom: null, runFrom: null, runTo: null });
  });

  it("a task still queued stretches the axis to now", () => {
    expect(axisOf([{ submit_time: iso(0), start_time: null, end_time: null }], t0 + 3000)).toEqual({
      start: t0,
      end: t0 + 3000,
    });
  });

  it("has no axis before anything was submitted", () => {
    expect(axisOf([{ submit_time: null }], t0)).toBeNull();
  });
});
