import { describe, expect, it } from "vitest";

import type { TaskSpec } from "./buildGraph";
import {
  branchOf,
  collapse,
  collapsedGraph,
  expand,
  groupOfTask,
  NO_GROUPS,
  pruneGroups,
  summarise,
} from "./collapse";

//   a -> b -> c -> e
//        b -> d -> e
//   x ---------> d        (d is also reached from x: not only through b)
//   e -> f
const tasks: TaskSpec[] = [
  { name: "a", type: "SHELL" },
  { name: "b", type: "SHELL", upstream: ["a"] },
  { name: "c", type: "SQL", upstream: ["b"] },
  { name: "x", type: "SHELL" },
  { name: "d", type: "PYTHON", upstream: ["b", "x"], disabled: true },
  { name: "e", type: "SQL", upstream: ["c", "d"] },
  { name: "f", type: "SHELL", upstream: "e" },
];

const sorted = (s: Iterable<string>) => [...s].sort();

describe("branchOf", () => {
  it("is the task and what is reachable only through it", () => {
    expect(sorted(branchOf(tasks, "b"))).toEqual(["b", "c"]);
    expect(sorted(branchOf(tasks, "a"))).toEqual(["a", "b", "c"]);
    expect(sorted(branchOf(tasks, "e"))).toEqual(["e", "f"]);
    expect(sorted(branchOf(tasks, "f"))).toEqual(["f"]);
    expect(branchOf(tasks, "nope").size).toBe(0);
  });

  it("takes a diamond whole when both sides come from the root, and counts a repeated upstream once", () => {
    const diamond: TaskSpec[] = [
      { name: "r", type: "SHELL" },
      { name: "p", type: "SHELL", upstream: ["r", "r"] },
      { name: "q", type: "SHELL", upstream: ["r"] },
      { name: "j", type: "SHELL", upstream: ["p", "q"] },
    ];
    expect(sorted(branchOf(diamond, "r"))).toEqual(["j", "p", "q", "r"]);
  });
});

describe("collapse and expand", () => {
  it("draws a group as one node, its edges once, nothing inside", () => {
    const { groups, group } = collapse(tasks, NO_GROUPS, branchOf(tasks, "a"), "a");
    expect(group?.id).toBe("group:1");
    const g = collapsedGraph(tasks, groups);
    expect(sorted(g.nodes.map((n) => n.id))).toEqual(["d", "e", "f", "group:1", "x"]);
    // b -> d and c -> e become group -> d and group -> e; a -> b, b -> c are inside
    expect(sorted(g.edges.map((e) => e.id))).toEqual(["d->e", "e->f", "group:1->d", "group:1->e", "x->d"]);
    expect(g.nodes.find((n) => n.id === "group:1")?.type).toBe("GROUP");
    expect(collapsedGraph(tasks, expand(groups, "group:1"))).toEqual(collapsedGraph(tasks, NO_GROUPS));
  });

  it("draws an edge between two groups once, however many links it stands for", () => {
    const first = collapse(tasks, NO_GROUPS, ["c", "d"]);
    expect(first.refused).toBeUndefined();
    const second = collapse(tasks, first.groups, ["e", "f"]);
    const edges = collapsedGraph(tasks, second.groups).edges.map((e) => e.id);
    expect(edges.filter((id) => id === "group:1->group:2")).toHaveLength(1);
    // b -> c and b -> d are one edge too
    expect(sorted(edges)).toEqual(["a->b", "b->group:1", "group:1->group:2", "x->group:1"]);
  });

  it("takes whole groups in when a collapse touches them, and expands them back to tasks", () => {
    const inner = collapse(tasks, NO_GROUPS, ["e", "f"]);
    const outer = collapse(tasks, inner.groups, ["d", "group:1"]);
    expect([...outer.groups.keys()]).toEqual(["group:2"]);
    expect(sorted(outer.group?.members ?? [])).toEqual(["d", "e", "f"]);
    expect(groupOfTask(outer.groups, "f")?.id).toBe("group:2");
    expect(outer.groups.size).toBe(1);
    expect(expand(outer.groups, "group:2").size).toBe(0);
  });

  it("refuses a set whose collapse would draw a cycle, and a set of one", () => {
    // a -> b -> c: {a, c} would be group -> b -> group
    const refused = collapse(tasks, NO_GROUPS, ["a", "c"]);
    expect(refused.refused).toMatch(/cycle/);
    expect(refused.groups).toBe(NO_GROUPS);
    expect(collapse(tasks, NO_GROUPS, ["f"]).refused).toMatch(/at least two/);
  });

  it("summarises a group: count, types and states, most first", () => {
    const { group } = collapse(tasks, NO_GROUPS, ["c", "d", "e"]);
    const states = new Map([
      ["c", "SUCCESS"],
      ["e", "SUCCESS"],
    ]);
    expect(summarise(group!, tasks, states)).toEqual({
      id: "group:1",
      label: "c",
      count: 3,
      types: [
        ["SQL", 2],
        ["PYTHON", 1],
      ],
      states: [
        ["SUCCESS", 2],
        ["DISABLED", 1],
      ],
    });
  });

  it("drops removed tasks from groups, and a group left with one task", () => {
    const { groups } = collapse(tasks, NO_GROUPS, ["c", "d", "e"]);
    expect(pruneGroups(groups, tasks)).toBe(groups);
    const fewer = tasks.filter((t) => t.name !== "d");
    expect(sorted(pruneGroups(groups, fewer).get("group:1")?.members ?? [])).toEqual(["c", "e"]);
    expect(
      pruneGroups(
        groups,
        fewer.filter((t) => t.name !== "c"),
      ).size,
    ).toBe(0);
  });

  it("collapses a 1,000-task branch and draws the rest", () => {
    const big: TaskSpec[] = [{ name: "t0", type: "SHELL" }];
    for (let i = 1; i < 1000; i += 1)
      big.push({ name: `t${i}`, type: "SHELL", upstream: [`t${Math.floor((i - 1) / 2)}`] });
    const branch = branchOf(big, "t1"); // a binary tree: t1's subtree
    expect(branch.size).toBe(511); // 1 + 2 + 4 + ... + 256
    const { groups } = collapse(big, NO_GROUPS, branch, "t1");
    const g = collapsedGraph(big, groups);
    expect(g.nodes).toHaveLength(1000 - 511 + 1);
    expect(g.edges.filter((e) => e.target === "group:1").map((e) => e.id)).toEqual(["t0->group:1"]);
  });
});
