import { describe, expect, it } from "vitest";

import type { Graph } from "./buildGraph";
import { LAYER_SPACING, layeredLayout, NODE_HEIGHT, NODE_WIDTH, pack, type Positions } from "./layered";

function graphOf(ids: string[], links: [string, string][]): Graph {
  return {
    nodes: ids.map((id) => ({ id, type: "SHELL", disabled: false })),
    edges: links.map(([source, target]) => ({ id: `${source}->${target}`, source, target })),
    dangling: [],
  };
}

/** The benchmark's workflow (bench/ui.py ``layered``): layers of ``width``, each task after two of the layer
 * before (the same position and the next one, wrapping). */
function benchGraph(tasks: number, width = 20): Graph {
  const ids = Array.from({ length: tasks }, (_, i) => `t${i}`);
  const links: [string, string][] = [];
  for (let i = width; i < tasks; i += 1) {
    const [layer, pos] = [Math.floor(i / width), i % width];
    for (const up of new Set([(layer - 1) * width + pos, (layer - 1) * width + ((pos + 1) % width)]))
      links.push([`t${up}`, `t${i}`]);
  }
  return graphOf(ids, links);
}

function expectNoOverlap(at: Positions) {
  const boxes = [...at.values()].sort((a, b) => a.x - b.x || a.y - b.y);
  for (let i = 0; i < boxes.length; i += 1)
    for (let j = i + 1; j < boxes.length && boxes[j]!.x < boxes[i]!.x + NODE_WIDTH; j += 1)
      expect(Math.abs(boxes[j]!.y - boxes[i]!.y)).toBeGreaterThanOrEqual(NODE_HEIGHT);
}

function expectForward(graph: Graph, at: Positions) {
  for (const edge of graph.edges) expect(at.get(edge.target)!.x).toBeGreaterThan(at.get(edge.source)!.x);
}

/** Crossings of edges between adjacent layers, the layers' nodes in the order ``rank`` gives. */
function crossings(graph: Graph, layerOf: (id: string) => number, rank: (id: string) => number): number {
  let count = 0;
  const byLayer = new Map<number, Graph["edges"]>();
  for (const e of graph.edges)
    if (layerOf(e.target) === layerOf(e.source) + 1)
      byLayer.set(layerOf(e.source), [...(byLayer.get(layerOf(e.source)) ?? []), e]);
  for (const spans of byLayer.values())
    for (const a of spans)
      for (const b of spans) {
        const [s, t] = [rank(a.source) - rank(b.source), rank(a.target) - rank(b.target)];
        if (s * t < 0) count += 1;
      }
  return count / 2;
}

describe("layeredLayout", () => {
  it("places every node, edges left to right, one layer per step of the longest path", () => {
    const graph = graphOf(
      ["a", "b", "c", "d"],
      [
        ["a", "b"],
        ["b", "c"],
        ["a", "c"],
        ["c", "d"],
      ],
    );
    const at = layeredLayout(graph);
    expect([...at.keys()].sort()).toEqual(["a", "b", "c", "d"]);
    expect(["a", "b", "c", "d"].map((id) => at.get(id)!.x)).toEqual(
      [0, 1, 2, 3].map((layer) => layer * (NODE_WIDTH + LAYER_SPACING)),
    );
    expectForward(graph, at);
  });

  it("keeps a long edge clear of the nodes it passes", () => {
    // a -> d passes b's and c's layers: its virtual nodes take a place in them, so the straight line from a
    // to d is not drawn through b or c
    const graph = graphOf(
      ["a", "b", "c", "d"],
      [
        ["a", "b"],
        ["b", "c"],
        ["c", "d"],
        ["a", "d"],
      ],
    );
    const at = layeredLayout(graph);
    expectForward(graph, at);
    const [a, d] = [at.get("a")!, at.get("d")!];
    for (const passed of ["b", "c"]) {
      const box = at.get(passed)!;
      // the straight line from a's source handle to d's target handle, at the passed node's left and right
      for (const x of [box.x, box.x + NODE_WIDTH]) {
        const y = a.y + ((d.y - a.y) * (x - a.x - NODE_WIDTH)) / (d.x - a.x - NODE_WIDTH) + NODE_HEIGHT / 2;
        expect(y < box.y || y > box.y + NODE_HEIGHT).toBe(true);
      }
    }
  });

  it("never overlaps two nodes and places the benchmark's 1,000 tasks forward", () => {
    const graph = benchGraph(1000);
    const at = layeredLayout(graph);
    expect(at.size).toBe(1000);
    expectForward(graph, at);
    expectNoOverlap(at);
  });

  it("crosses no more edges than the tasks in document order", () => {
    const graph = benchGraph(1000);
    const at = layeredLayout(graph);
    const layerOf = (id: string) => Math.floor(Number(id.slice(1)) / 20);
    const laidOut = crossings(graph, layerOf, (id) => at.get(id)!.y);
    const naive = crossings(graph, layerOf, (id) => Number(id.slice(1)));
    expect(naive).toBeGreaterThan(0);
    expect(laidOut).toBeLessThanOrEqual(naive);
  });

  it("reduces crossings an unlucky order makes", () => {
    // two chains whose second layer is given crossed: a1 -> b2, a2 -> b1
    const graph = graphOf(
      ["a1", "a2", "b1", "b2"],
      [
        ["a1", "b2"],
        ["a2", "b1"],
      ],
    );
    const at = layeredLayout(graph);
    const above = (u: string, v: string) => at.get(u)!.y < at.get(v)!.y;
    expect(above("a1", "a2")).toBe(above("b2", "b1"));
  });

  it("gives the same positions for the same graph", () => {
    const graph = benchGraph(300, 7);
    expect([...layeredLayout(graph)]).toEqual([...layeredLayout(structuredClone(graph))]);
  });

  it("terminates on cycles and still places every node without overlap", () => {
    const graph = graphOf(
      ["a", "b", "c", "d"],
      [
        ["a", "b"],
        ["b", "c"],
        ["c", "a"],
        ["c", "d"],
        ["d", "b"],
        ["d", "d"],
      ],
    );
    const at = layeredLayout(graph);
    expect(at.size).toBe(4);
    expectNoOverlap(at);
    // the edges of the depth-first search from a stay forward; only the back edges are drawn backwards
    expectForward(
      graphOf(
        ["a", "b", "c", "d"],
        [
          ["a", "b"],
          ["b", "c"],
          ["c", "d"],
        ],
      ),
      at,
    );
  });

  it("stacks disconnected components and isolated nodes, ignoring duplicate and unknown edges", () => {
    const graph = graphOf(
      ["a", "b", "lonely", "x", "y", "z"],
      [
        ["a", "b"],
        ["a", "b"],
        ["x", "y"],
        ["y", "z"],
        ["x", "ghost"],
      ],
    );
    const at = layeredLayout(graph);
    expect(at.size).toBe(6);
    expectNoOverlap(at);
    expectForward(
      graphOf(
        [],
        [
          ["a", "b"],
          ["x", "y"],
          ["y", "z"],
        ],
      ),
      at,
    );
    // components in the order of their first node, each below the one before
    expect(at.get("a")!.y).toBeLessThan(at.get("lonely")!.y);
    expect(at.get("lonely")!.y).toBeLessThan(at.get("x")!.y);
    expect(at.get("lonely")!.x).toBe(0);
  });

  it("lays out a graph whose long edges would need a quadratic number of virtual nodes", () => {
    // a chain of 1,000 and its first task linked to every other: 500,000 virtual nodes if each got its own;
    // past the budget the longest edges are left out of ordering and placement, still drawn forward
    const ids = Array.from({ length: 1000 }, (_, i) => `n${i}`);
    const links = ids.slice(1).flatMap((id, i): [string, string][] => [
      [`n${i}`, id],
      ["n0", id],
    ]);
    const graph = graphOf(ids, links);
    const at = layeredLayout(graph);
    expect(at.size).toBe(1000);
    expectForward(graph, at);
    expectNoOverlap(at);
  });

  it("lays out an empty graph", () => {
    expect(layeredLayout(graphOf([], [])).size).toBe(0);
  });
});

describe("pack", () => {
  it("keeps the order and the spacing, as close to the wanted positions as it can", () => {
    expect(pack([0, 100], [46, 46], [1, 1])).toEqual([0, 100]);
    // both want 0: they share the difference (62 apart), centred on it
    expect(pack([0, 0], [46, 46], [1, 1])).toEqual([-31, 31]);
    // a heavier item moves less
    expect(pack([0, 0], [46, 46], [1, 3])).toEqual([-46.5, 15.5]);
  });
});
