// Graph layout in a Web Worker (never on the main thread), cached by an exact key: workflow versions are
// immutable, so "code:version" names one layout forever. Small graphs are laid out by elkjs; big ones
// (usesLayered) by our own layered layout (layered.ts), an order of magnitude faster, in a small worker of its
// own. Big layouts are also kept in IndexedDB (as Dagster does), so reopening a 1,000-task instance in a new
// tab skips the layout.
import { Position } from "@xyflow/react";
import ELK, { type ElkNode } from "elkjs/lib/elk-api";
import ElkWorker from "elkjs/lib/elk-worker.min.js?worker";

import type { Graph } from "./buildGraph";
import { NODE_HEIGHT, NODE_WIDTH, type Positions } from "./layered";
import type { LayeredAnswer, LayeredRequest } from "./layered.worker";
import LayeredWorker from "./layered.worker?worker";

export { NODE_HEIGHT, NODE_WIDTH, type Positions };

/** Above these sizes the layered layout, not elkjs: elkjs's time grows from about 300 nodes on (0.2 s up to
 * there, 0.4-0.5 s at 500 nodes and 1 s at 1,000 in Node on this machine), the layered layout's stays under
 * 0.1 s at 1,000. Below them elkjs's look (network-simplex placement up to 100 edges) is cheap. */
export const LAYERED_NODES = 200;
export const LAYERED_EDGES = 400;

export function usesLayered(graph: Pick<Graph, "nodes" | "edges">): boolean {
  return graph.nodes.length > LAYERED_NODES || graph.edges.length > LAYERED_EDGES;
}

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

/** Bumped when the options or the layered layout change: stored layouts of older ones are not reused. */
const LAYOUT_VERSION = 3;
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

let layered: Worker | null = null;
let asked = 0;
const answers = new Map<number, { resolve: (at: Positions) => void; reject: (error: Error) => void }>();

function layeredWorker(): Worker {
  if (layered) return layered;
  layered = new LayeredWorker();
  layered.onmessage = (event: MessageEvent<LayeredAnswer>) => {
    const answer = event.data;
    const waiting = answers.get(answer.id);
    answers.delete(answer.id);
    if (!waiting) return;
    if ("error" in answer) waiting.reject(new Error(answer.error));
    else waiting.resolve(new Map(answer.positions.map(([id, x, y]) => [id, { x, y }])));
  };
  layered.onerror = (event) => {
    // the worker failed to load or threw outside a layout: every layout waiting on it fails, the next starts anew
    const error = new Error(event.message || "the layout worker failed");
    for (const waiting of answers.values()) waiting.reject(error);
    answers.clear();
    layered?.terminate();
    layered = null;
  };
  return layered;
}

function layeredInWorker(graph: Graph): Promise<Positions> {
  const request: LayeredRequest = {
    id: (asked += 1),
    nodes: graph.nodes.map((n) => n.id),
    edges: graph.edges.map((e) => [e.source, e.target]),
  };
  return new Promise((resolve, reject) => {
    answers.set(request.id, { resolve, reject });
    layeredWorker().postMessage(request);
  });
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

/** Start the layout workers while the page still waits for its data, so their scripts load off the critical
 * path. The layered layout's worker is small and always started. ELK's (1.6 MB of script) is started, and run
 * once on a small graph to warm its code up, only when told the page's graph has at most ``tasks`` tasks and
 * that is few enough for elkjs: a big graph's page never pays for it. Each once per page load. */
export function prewarmLayout(tasks?: number): void {
  void openDb(); // a fresh profile creates the store: not on the way of the first layout
  layeredWorker();
  if (tasks === undefined || tasks > LAYERED_NODES) return;
  warming ??= worker()
    .layout({ ...toElk(sampleGraph(20)), layoutOptions: layoutOptions(101) })
    .catch(() => undefined);
}

async function elkLayout(graph: Graph): Promise<Positions> {
  const done = await worker().layout(toElk(graph));
  const out: Positions = new Map();
  for (const child of done.children ?? []) out.set(child.id, { x: child.x ?? 0, y: child.y ?? 0 });
  return out;
}

async function compute(graph: Graph): Promise<Positions> {
  const start = performance.now();
  const out = await (usesLayered(graph) ? layeredInWorker(graph) : elkLayout(graph));
  // the benchmark (tests/e2e/perf.mjs) reads these: when layouts ran and for how long
  performance.measure(`porpoise:layout:${graph.nodes.length}`, { start, end: performance.now() });
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
