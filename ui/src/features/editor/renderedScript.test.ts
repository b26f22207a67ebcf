import { describe, expect, it } from "vitest";

import { renderedBlocks } from "./renderedScript";

describe("renderedBlocks", () => {
  it("takes the counted lines of each block after the header, whatever they hold", () => {
    const lines = [
      "[porpoise] 2026-01-01T00:00:00.000+00:00 SHELL task 't' attempt 1 on w:1",
      "[porpoise] rendered rawScript (3 lines):",
      "echo 20260101",
      "[porpoise] end of rendered rawScript",
      "echo ***",
      "[porpoise] end of rendered rawScript",
      "20260101",
      "[porpoise] rendered sql (1 lines):",
    ];
    expect(renderedBlocks(lines)).toEqual([
      {
        field: "rawScript",
        text: "echo 20260101\n[porpoise] end of rendered rawScript\necho ***",
        partial: false,
      },
    ]);
  });

  it("says when the head held only part of a block, and finds none in a log without one", () => {
    expect(renderedBlocks(["header", "[porpoise] rendered sql (5 lines):", "select 1"])).toEqual([
      { field: "sql", text: "select 1", partial: true },
    ]);
    expect(renderedBlocks(["header", "output"])).toEqual([]);
  });
});
