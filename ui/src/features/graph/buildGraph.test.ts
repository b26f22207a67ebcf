import { describe, expect, it } from "vitest";

import { buildGraph, statesByName } from "./buildGraph";
import { layoutOptions, toElk } from "./layout";

describe("buildGraph", () => {
  it("makes one node per task and one edge per upstream link, string or list", () => {
    const g = buildGraph([
      { name: "a", type: "SHELL" },
      { name: "b", type: "SQL", upstream: "a" },
      { name: "c", type: "SHELL", upstream: ["a", "b", "ghost"], disabled: true },
    ]);
    expect(g.nodes).toEqual([
      { id: "a", type: "SHELL", disabled: false },
      { id: "b", type: "SQL", disabled: false },
      { id: "c", type: "SHELL", disabled: true },
    ]);
    expect(g.edges.map((e) => e.id)).toEqual(["a->b", "a->c", "b->c"]);
    expect(g.dangling).toEqual(["ghost"]);
  });

  it("scales to 1,000 tasks and hands ELK cheap options for big graphs", () => {
    const tasks = Array.from({ length: 1000 }, (_, i) => ({
      name: `t${i}`,
      type: "SHELL",
      upstream: i === 0 ? [] : [`t${Math.floor((i - 1) / 2)}`],
    }));
    const g = buildGraph(tasks);
    expect(g.edges).toHaveLength(999);
    const elk = toElk(g);
    expect(elk.children).toHaveLength(1000);
    expect(elk.layoutOptions?.["elk.layered.nodePlacement.strategy"]).toBe("SIMPLE");
    expect(layoutOptions(10)["elk.layered.nodePlacement.strategy"]).toBe("NETWORK_SIMPLEX");
    expect(layoutOptions(10)["elk.direction"]).toBe("RIGHT");
  });
});

describe("statesByName", () => {
  it("keeps the current attempt of each task", () => {
    const m = statesByName([
      { name: "a", current: false, state: "FAILURE" },
      { name: "a", current: true, state: "SUCCESS" },
      { name: "b", current: true, state: "RUNNING_EXECUTION" },
    ]);
    expect(m.get("a")?.state).toBe("SUCCESS");
    expect(m.size).toBe(2);
  });
});
