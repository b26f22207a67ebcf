import { describe, expect, it } from "vitest";

import type { DraftTask } from "./draft";
import { placeNew, syncEdges, syncNodes } from "./elements";

const tasks: DraftTask[] = [
  { name: "a", type: "SHELL" },
  { name: "b", type: "SQL", upstream: ["a"] },
];
const origin = () => ({ x: 0, y: 0 });

describe("editor elements", () => {
  it("keeps the node objects of unchanged tasks, and their positions", () => {
    const first = syncNodes([], tasks, origin, new Map());
    const moved = [{ ...first[0]!, position: { x: 50, y: 60 } }, first[1]!];
    const renamedType = [tasks[0]!, { ...tasks[1]!, type: "SHELL" }];
    const next = syncNodes(moved, renamedType, origin, new Map());
    expect(next[0]).toBe(moved[0]);
    expect(next[1]).not.toBe(moved[1]);
    expect(next[1]?.position).toEqual(moved[1]?.position);
    expect(next[1]?.data.type).toBe("SHELL");
  });

  it("marks the refused task and places a new one where told", () => {
    const next = syncNodes(
      [],
      tasks,
      (n) => (n === "b" ? { x: 9, y: 9 } : { x: 0, y: 0 }),
      new Map([["b", "bad"]]),
    );
    expect(next[1]?.data.error).toBe("bad");
    expect(next[1]?.position).toEqual({ x: 9, y: 9 });
    expect(next[0]?.data.error).toBeUndefined();
  });

  it("reuses edges by id and drops links to missing tasks", () => {
    const first = syncEdges([], [...tasks, { name: "c", type: "SHELL", upstream: ["b", "ghost"] }]);
    expect(first.map((e) => e.id)).toEqual(["a->b", "b->c"]);
    const again = syncEdges(first, tasks);
    expect(again).toHaveLength(1);
    expect(again[0]).toBe(first[0]);
  });

  it("puts a new task right of the selected one, below what is there", () => {
    const nodes = syncNodes([], tasks, (n) => (n === "a" ? { x: 0, y: 0 } : { x: 240, y: 0 }), new Map());
    expect(placeNew(nodes, { x: 0, y: 0 }, { x: 5, y: 5 })).toEqual({ x: 240, y: 64 });
    expect(placeNew(nodes, undefined, { x: 5, y: 5 })).toEqual({ x: 5, y: 5 });
  });
});
