import { describe, expect, it } from "vitest";

import type { DraftTask } from "./draft";
import { collapse, collapsedGraph, NO_GROUPS, summarise } from "../graph/collapse";
import { placeNew, syncEdges, syncGroupNodes, syncNodes } from "./elements";

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
    const three = [...tasks, { name: "c", type: "SHELL", upstream: ["b", "ghost"] }];
    const first = syncEdges([], collapsedGraph(three, NO_GROUPS).edges);
    expect(first.map((e) => e.id)).toEqual(["a->b", "b->c"]);
    const again = syncEdges(first, collapsedGraph(tasks, NO_GROUPS).edges);
    expect(again).toHaveLength(1);
    expect(again[0]).toBe(first[0]);
  });

  it("labels a SWITCH branch's edge, and redraws an edge whose label changed", () => {
    const drawn = collapsedGraph(tasks, NO_GROUPS).edges;
    const plain = syncEdges([], drawn);
    const labelled = syncEdges(plain, drawn, new Map([["a->b", "default"]]));
    expect(labelled[0]).not.toBe(plain[0]);
    expect(labelled[0]?.label).toBe("default");
    expect(syncEdges(labelled, drawn, new Map([["a->b", "default"]]))[0]).toBe(labelled[0]);
  });

  it("draws a group as one node that cannot be deleted or linked, its edges not deletable by hand", () => {
    const three = [...tasks, { name: "c", type: "SHELL", upstream: ["a"] }];
    const { groups, group } = collapse(three, NO_GROUPS, ["b", "c"]);
    const summary = summarise(group!, three);
    const expand = () => {};
    const nodes = syncGroupNodes([], [summary], () => ({ x: 3, y: 4 }), expand);
    expect(nodes[0]).toMatchObject({
      id: "group:1",
      type: "collapsed",
      deletable: false,
      connectable: false,
    });
    expect(nodes[0]?.position).toEqual({ x: 3, y: 4 });
    expect(syncGroupNodes(nodes, [{ ...summary }], () => ({ x: 0, y: 0 }), expand)[0]).toBe(nodes[0]);
    const edges = syncEdges([], collapsedGraph(three, groups).edges);
    expect(edges).toEqual([{ id: "a->group:1", source: "a", target: "group:1", deletable: false }]);
  });

  it("puts a new task right of the selected one, below what is there", () => {
    const nodes = syncNodes([], tasks, (n) => (n === "a" ? { x: 0, y: 0 } : { x: 240, y: 0 }), new Map());
    expect(placeNew(nodes, { x: 0, y: 0 }, { x: 5, y: 5 })).toEqual({ x: 240, y: 64 });
    expect(placeNew(nodes, undefined, { x: 5, y: 5 })).toEqual({ x: 5, y: 5 });
  });
});
