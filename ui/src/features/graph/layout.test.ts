// Which worker lays a graph out: the layered layout's above the size threshold, elkjs's below it; elkjs's
// 1.6 MB worker is not started for a big graph's page.
import { afterEach, describe, expect, it, vi } from "vitest";

import type { Graph } from "./buildGraph";
import { layeredLayout } from "./layered";
import type { LayeredAnswer, LayeredRequest } from "./layered.worker";
import { LAYERED_NODES, layoutOnce, prewarmLayout, sampleGraph, usesLayered } from "./layout";

const started = vi.hoisted(() => ({ elk: 0, layered: 0, requests: [] as { id: number; nodes: string[] }[] }));

// the layered worker, run in this thread: the real layout behind the worker's message protocol
vi.mock("./layered.worker?worker", () => ({
  default: class {
    onmessage: ((event: MessageEvent<LayeredAnswer>) => void) | null = null;
    onerror: ((event: ErrorEvent) => void) | null = null;
    constructor() {
      started.layered += 1;
    }
    postMessage(request: LayeredRequest) {
      started.requests.push(request);
      const at = layeredLayout({
        nodes: request.nodes.map((id) => ({ id, type: "", disabled: false })),
        edges: request.edges.map(([source, target]) => ({ id: "", source, target })),
      });
      const positions = [...at].map(([id, { x, y }]) => [id, x, y] as [string, number, number]);
      queueMicrotask(() => this.onmessage?.({ data: { id: request.id, positions } } as MessageEvent));
    }
    terminate() {}
  },
}));

// elkjs's worker: counted, never answering (happy-dom has no Worker)
vi.mock("elkjs/lib/elk-worker.min.js?worker", () => ({
  default: class {
    constructor() {
      started.elk += 1;
    }
    postMessage() {}
    addEventListener() {}
    terminate() {}
  },
}));

afterEach(() => {
  started.requests.length = 0;
});

function chain(size: number): Graph {
  const nodes = Array.from({ length: size }, (_, i) => ({ id: `n${i}`, type: "SHELL", disabled: false }));
  const edges = nodes.slice(1).map((n, i) => ({ id: `e${i}`, source: `n${i}`, target: n.id }));
  return { nodes, edges, dangling: [] };
}

describe("layout", () => {
  it("lays a big graph out in the layered layout's worker, timed for the benchmark", async () => {
    const graph = chain(LAYERED_NODES + 1);
    expect(usesLayered(graph)).toBe(true);
    const at = await layoutOnce(graph);
    expect(at).toEqual(layeredLayout(graph));
    expect(started.requests.map((r) => r.nodes.length)).toEqual([LAYERED_NODES + 1]);
    expect(performance.getEntriesByName(`porpoise:layout:${LAYERED_NODES + 1}`)).toHaveLength(1);
  });

  it("keeps elkjs for small graphs", () => {
    expect(usesLayered(chain(LAYERED_NODES))).toBe(false);
    expect(usesLayered(sampleGraph(20))).toBe(false); // the warm-up's graph is one elkjs lays out
  });

  it("starts elkjs's worker in the prewarm only for a graph small enough for it", () => {
    prewarmLayout();
    prewarmLayout(LAYERED_NODES + 1);
    expect(started.layered).toBe(1);
    expect(started.elk).toBe(0);
    prewarmLayout(3);
    expect(started.elk).toBe(1);
  });
});
