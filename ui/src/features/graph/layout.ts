// Graph layout with elkjs in a Web Worker (never on the main thread), cached by an exact key: workflow
// versions are immutable, so "code:version" names one layout forever. Big layouts are also kept in
// IndexedDB (as Dagster does), so reopening a 1,000-task instance in a new tab skips the layout.
import { Position } from "@xyflow/react";
import ELK, { type ElkNode } from "elkjs/lib/elk-api";
import ElkWorker from "elkjs/lib/elk-worker.min.js?worker";

import type { Graph } from "./buildGraph";

export const NODE_WIDTH = 190;
export const NODE_HEIGHT = 46;

export type Positions = Map<string, { x: number; y: number }>;

/** A node's size and handles known before it is drawn (React Flow otherwise draws every node once to
 * measure it, all 1,000 of a big graph, before it culls those out of view): spread into each node. */
export const PRESIZED = {
  initialWidth: NODE_WIDTH,
  initialHeight: NODE_HEIGHT,
  handles: [
    { type: "target" as const, position: Position.Left, x: -4, y: NODE_HEIGHT / 2 - 4, width: 8, height: 8 },
    {
      type: "source" as const,
      position: Position.Right,
      x: NODE_WIDTH - 4,
      y: NODE_HEIGHT / 2 - 4,
      width: 8,
      height: 8,
    },
  ],
};

let elk: InstanceType<typeof ELK> | null = null;
const cache = new Map<string, Promise<Positions>>();

/** ELK options: left to right. Above 100 edges the cheap settings (longest-path layering, one sweep, no
 * greedy switch or compaction): a 1,000-task graph lays out in under a second instead of several. */
export function layoutOptions(edges: number): Record<string, string> {
  const options: Record<string, string> = {
    "elk.algorithm": "layered",
    "elk.direction": "RIGHT",
    "elk.spacing.nodeNode": "16",
    "elk.layered.spacing.nodeNodeBetweenLayers": "48",
    "elk.edgeRouting": "POLYLINE",
  };
  if (edges <= 100) return { ...options, "elk.layered.nodePlacement.strategy": "NETWORK_SIMPLEX" };
  return {
    ...options,
    "elk.layered.nodePlacement.strategy": "SIMPLE",
    "elk.layered.thoroughness": "1",
    "elk.layered.layering.strategy": "LONGEST_PATH",
    "elk.layered.crossingMinimization.greedySwitch.type": "OFF",
    "elk.layered.compaction.postCompaction.strategy": "NONE",
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

/** Bumped when the options change: stored layouts of older options are not reused. */
const LAYOUT_VERSION = 2;
const STORED_MIN_NODES = 50;
const STORED_MAX = 200;

let db: Promise<IDBDatabase | null> | null = null;

function openDb(): Promise<IDBDatabase | null> {
  db ??= new Promise((resolve) => {
    if (typeof indexedDB === "undefined") return resolve(null);
    const request = indexedDB.open("porpoise-layouts", 1);
    request.onupgradeneeded = () => request.result.createObjectStore("layouts");
    request.onsuccess = () => resolve(request.result);
    request.onerror = () => resolve(null);
  });
  return db;
}

async function readStored(key: string): Promise<Positions | null> {
  const handle = await openDb();
  if (!handle) return null;
  return new Promise((resolve) => {
    const request = handle.transaction("layouts").objectStore("layouts").get(key);
    request.onsuccess = () =>
      resolve(
        Array.isArray(request.result)
          ? new Map(request.result as [string, { x: number; y: number }][])
          : null,
      );
    request.onerror = () => resolve(null);
  });
}

async function writeStored(key: string, positions: Positions): Promise<void> {
  const handle = await openDb();
  if (!handle) return;
  const store = handle.transaction("layouts", "readwrite").objectStore("layouts");
  const count = store.count();
  count.onsuccess = () => {
    if (count.result >= STORED_MAX) store.clear(); // bounded: start over rather than grow
    store.put([...positions], key);
  };
}

function worker(): InstanceType<typeof ELK> {
  elk ??= new ELK({ workerFactory: () => new ElkWorker() });
  return elk;
}

let warming: Promise<unknown> | null = null;

/** A small layered graph (the warm-up's): ``layers`` of 6 tasks, each after two of the layer before. */
export function sampleGraph(layers: number): Graph {
  const nodes = [];
  const edges = [];
  for (let i = 0; i < layers * 6; i += 1) {
    nodes.push({ id: `w${i}`, type: "", disabled: false });
    if (i < 6) continue;
    for (const up of new Set([i - 6, i - 6 + ((i + 1) % 6 === 0 ? -5 : 1)]))
      edges.push({ id: `w${up}->w${i}`, source: `w${up}`, target: `w${i}` });
  }
  return { nodes, edges, dangling: [] };
}

/** Start the layout worker and run ELK once on a small graph with the big-graph options, while the page still
 * waits for its data: the worker's script loads and ELK's code warms up off the critical path (a cold worker's
 * first layout of a 1,000-task graph takes about a third longer). Once per page load. */
export function prewarmLayout(): void {
  void openDb(); // a fresh profile creates the store: not on the way of the first layout
  warming ??= worker()
    .layout({ ...toElk(sampleGraph(20)), layoutOptions: layoutOptions(101) })
    .catch(() => undefined);
}

async function compute(graph: Graph): Promise<Positions> {
  const elk = worker();
  const start = performance.now();
  const done = await elk.layout(toElk(graph));
  // the benchmark (tests/e2e/perf.mjs) reads these: when layouts ran and for how long
  performance.measure(`porpoise:layout:${graph.nodes.length}`, { start, end: performance.now() });
  const out: Positions = new Map();
  for (const child of done.children ?? []) out.set(child.id, { x: child.x ?? 0, y: child.y ?? 0 });
  return out;
}

/** A layout asked for once (the editor's "lay out again", a collapse): computed, never cached. */
export function layoutOnce(graph: Graph): Promise<Positions> {
  return compute(graph);
}

export function layout(key: string, graph: Graph): Promise<Positions> {
  const hit = cache.get(key);
  if (hit) return hit;
  const stored = !key.startsWith("draft:") && graph.nodes.length >= STORED_MIN_NODES;
  const storedKey = `v${LAYOUT_VERSION}:${key}`;
  const pending = (async () => {
    const found = stored ? await readStored(storedKey) : null;
    if (found && found.size === graph.nodes.length) return found;
    const positions = await compute(graph);
    if (stored) void writeStored(storedKey, positions);
    return positions;
  })();
  cache.set(key, pending);
  pending.catch(() => cache.delete(key));
  return pending;
}
