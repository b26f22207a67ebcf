import { describe, expect, it } from "vitest";

import { LogStore, PAGE } from "./logStore";

const lines = (from: number, n: number) => Array.from({ length: n }, (_, i) => `line ${from + i}`);

describe("LogStore", () => {
  it("pages lines by number and grows as the server answers", () => {
    const s = new LogStore();
    s.put(0, lines(0, PAGE), PAGE, false);
    s.put(PAGE, lines(PAGE, 10), PAGE + 10, false);
    expect(s.known).toBe(PAGE + 10);
    expect(s.line(PAGE + 3)).toBe(`line ${PAGE + 3}`);
    expect(s.complete).toBe(false);
    // everything known is held: nothing to fetch for the view (the tail poll asks for more)
    expect(s.missing(0, PAGE + 9)).toEqual([]);
    expect(s.missing(0, 5 * PAGE)).toEqual([]);
    s.put(PAGE + 10, [], PAGE + 10, true);
    expect(s.complete).toBe(true);
  });

  it("keeps at most maxPages pages, dropping the farthest from the view, and refetches them", () => {
    const s = new LogStore(3);
    for (let p = 0; p < 6; p += 1) s.put(p * PAGE, lines(p * PAGE, PAGE), (p + 1) * PAGE, false);
    s.evict(5 * PAGE);
    expect(s.heldPages).toBe(3);
    expect(s.has(5) && s.has(4) && s.has(3)).toBe(true);
    expect(s.line(10)).toBeUndefined();
    expect(s.missing(0, 10)).toEqual([{ skip: 0, limit: PAGE }]);
  });

  it("asks for the rest of a page a size-capped reply cut short, and of a page refilled from its middle", () => {
    const s = new LogStore(2);
    s.put(0, lines(0, 300), 300, false); // the server stopped at 300 lines (64 KB)
    s.put(300, [], 2 * PAGE, false); // a later reply says more lines exist
    expect(s.missing(0, 10)).toEqual([{ skip: 300, limit: PAGE - 300 }]);
    s.put(2 * PAGE + 500, ["x"], 2 * PAGE + 501, false);
    expect(s.missing(2 * PAGE, 2 * PAGE + 500)).toEqual([{ skip: 2 * PAGE, limit: PAGE }]);
  });

  it("opens at the end: the server's total sets the line count before the earlier pages are read", () => {
    const s = new LogStore();
    s.put(5 * PAGE + 10, lines(5 * PAGE + 10, 5), 5 * PAGE + 15, true, 5 * PAGE + 15);
    expect(s.known).toBe(5 * PAGE + 15);
    expect(s.complete).toBe(true);
    expect(s.line(5 * PAGE + 14)).toBe(`line ${5 * PAGE + 14}`);
    expect(s.missing(5 * PAGE, 5 * PAGE + 14)).toEqual([{ skip: 5 * PAGE, limit: PAGE }]);
  });
});
