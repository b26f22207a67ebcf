import { describe, expect, it } from "vitest";

import { finishedCount } from "./count";

const task = (name: string, state: string, current = true, finished = true) => ({
  name,
  state,
  current,
  finished,
});

describe("finishedCount", () => {
  it("counts a retried task once, by its latest attempt", () => {
    const tasks = [
      task("a", "SUCCESS"),
      task("b", "FAILURE", false),
      task("b", "RUNNING_EXECUTION", true, false),
      task("c", "SUCCESS"),
    ];
    expect(finishedCount(tasks)).toEqual({ done: 2, skipped: 0 });
  });
  it("counts skipped branches as finished, and says how many", () => {
    const tasks = [task("switch", "SUCCESS"), task("left", "SUCCESS"), task("right", "SKIPPED")];
    expect(finishedCount(tasks)).toEqual({ done: 3, skipped: 1 });
  });
});
