// Graph layout with elkjs in a Web Worker (never on the main thread), cached by an exact key: workflow
// versions are immutable, so "code:version" names one layout forever.
import ELK, { type ElkNode } from "elkjs/lib/elk-api";
import ElkWorker from "elkjs/lib/elk-worker.min.js?worker";

import type { Graph } from "./buildGraph";

export const NODE_WIDTH = 190;
export const NODE_HEIGHT = 46;

export type Positions = Map<string, { x: number; y: number }>;

let elk: InstanceType<typeof ELK> | null = null;
const cache = new Map<string, Promise<Positions>>();

/** ELK options: left to right; cheaper settings for big graphs (as Airflow's PR #65031). */
export function layoutOptions(edges: number): Record<string, string> {
  const big = edges > 100;
  return {
    "elk.algorithm": "layered",
    "elk.direction": "RIGHT",
    "elk.spacing.nodeNode": "16",
    "elk.layered.spacing.nodeNodeBetweenLayers": "48",
    "elk.layered.nodePlacement.strategy": big ? "SIMPLE" : "NETWORK_SIMPLEX",
    "elk.layered.thoroughness": big ? "1" : "7",
    "elk.edgeRouting": "POLYLINE",
  };
}

export function toElk(graph: Graph): ElkNode {
  return {
    id: "root",
    layoutOptions: layoutOptions(graph.edges.length),
    children: graph.nodes.map((n) => ({ id: n.id, width: NODE_WIDTH, height: NODE_HEIGHT })),
    edges: graph.edges.map((e) => ({ id: e.id, sources: [e.source], targets: [e.target] })),
  };
}

export function layout(key: string, graph: Graph): Promise<Positions> {
  const hit = cache.get(key);
  if (hit) return hit;
  elk ??= new ELK({ workerFactory: () => new ElkWorker() });
  const pending = elk.layout(toElk(graph)).then((done) => {
    const out: Positions = new Map();
    for (const child of done.children ?? []) out.set(child.id, { x: child.x ?? 0, y: child.y ?? 0 });
    return out;
  });
  cache.set(key, pending);
  pending.catch(() => cache.delete(key));
  return pending;
}
