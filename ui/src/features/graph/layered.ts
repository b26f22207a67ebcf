// Pure: a layered (Sugiyama) layout, left to right, for graphs too big for elkjs to lay out quickly. About
// linear in nodes + edges per sweep: a 1,000-task graph in tens of milliseconds where elkjs takes a second.
// Steps: break cycles (a task graph is a DAG, but never hang) -> layers by longest path from the sources ->
// a virtual node per layer a long edge passes, so edges do not run through nodes -> crossing reduction by
// barycenter sweeps (the best order seen is kept) -> each layer's vertical positions pulled towards the
// median of its neighbours, packed in order without overlap. Each connected component is laid out alone;
// components are stacked top to bottom in the order of their first node. Deterministic: positions depend
// only on the order of the graph's nodes and edges.
import type { Graph } from "./buildGraph";

export const NODE_WIDTH = 190;
export const NODE_HEIGHT = 46;
/** Vertical space between two nodes of a layer, and horizontal space between two layers (as ELK's). */
export const NODE_SPACING = 16;
export const LAYER_SPACING = 48;
/** Height given to a virtual node (a long edge passing a layer). */
const VIRTUAL_HEIGHT = 10;
/** At most this many virtual nodes per node (but at least ``VIRTUAL_MIN``): bounds the layout's time. */
const VIRTUAL_PER_NODE = 20;
const VIRTUAL_MIN = 5000;
const ORDER_SWEEPS = 4;
const PLACE_SWEEPS = 4;

export type Positions = Map<string, { x: number; y: number }>;

/** One component's nodes (real first, then virtual) and its edges between adjacent layers. */
interface Component {
  /** the graph's node index of each real node */
  real: number[];
  layer: number[];
  up: number[][];
  down: number[][];
  layers: number;
}

/** Node positions (top-left corners) for ``graph``. Self-loops, duplicate edges and edges naming unknown
 * nodes are ignored. */
export function layeredLayout(graph: Pick<Graph, "nodes" | "edges">): Positions {
  const n = graph.nodes.length;
  const index = new Map<string, number>();
  graph.nodes.forEach((node, i) => index.set(node.id, i));
  const out = new Array<number[]>(n);
  for (let i = 0; i < n; i += 1) out[i] = [];
  const seen = new Set<number>();
  for (const edge of graph.edges) {
    const s = index.get(edge.source);
    const t = index.get(edge.target);
    if (s === undefined || t === undefined || s === t || seen.has(s * n + t)) continue;
    seen.add(s * n + t);
    out[s]!.push(t);
  }
  const acyclic = breakCycles(out);
  const positions: Positions = new Map();
  let top = 0;
  for (const members of components(acyclic)) {
    const component = expand(members, acyclic);
    const order = orderLayers(component);
    const y = place(component, order);
    let lowest = Infinity;
    let highest = -Infinity;
    for (let v = 0; v < y.length; v += 1) {
      const half = (v < component.real.length ? NODE_HEIGHT : VIRTUAL_HEIGHT) / 2;
      lowest = Math.min(lowest, y[v]! - half);
      highest = Math.max(highest, y[v]! + half);
    }
    component.real.forEach((node, v) =>
      positions.set(graph.nodes[node]!.id, {
        x: component.layer[v]! * (NODE_WIDTH + LAYER_SPACING),
        y: top + y[v]! - NODE_HEIGHT / 2 - lowest,
      }),
    );
    top += highest - lowest + NODE_SPACING;
  }
  return positions;
}

/** The edges with every back edge of a depth-first search (in node order) reversed: no cycle is left. */
function breakCycles(out: number[][]): number[][] {
  const n = out.length;
  const state = new Uint8Array(n); // 0 unseen, 1 on the stack, 2 done
  const next = new Array<number[]>(n);
  for (let i = 0; i < n; i += 1) next[i] = [];
  const reversed: [number, number][] = [];
  const stack: number[] = [];
  const cursor = new Uint32Array(n);
  for (let root = 0; root < n; root += 1) {
    if (state[root]) continue;
    state[root] = 1;
    stack.push(root);
    while (stack.length) {
      const v = stack[stack.length - 1]!;
      const targets = out[v]!;
      if (cursor[v]! < targets.length) {
        const t = targets[cursor[v]!]!;
        cursor[v] = cursor[v]! + 1;
        if (state[t] === 1) reversed.push([t, v]);
        else {
          next[v]!.push(t);
          if (state[t] === 0) {
            state[t] = 1;
            stack.push(t);
          }
        }
      } else {
        state[v] = 2;
        stack.pop();
      }
    }
  }
  for (const [s, t] of reversed) if (!next[s]!.includes(t)) next[s]!.push(t);
  return next;
}

/** Connected components (edges taken both ways), each as its node indices ascending, ordered by their first. */
function components(out: number[][]): number[][] {
  const n = out.length;
  const parent = new Int32Array(n);
  for (let i = 0; i < n; i += 1) parent[i] = i;
  const find = (v: number): number => {
    while (parent[v] !== v) {
      parent[v] = parent[parent[v]!]!;
      v = parent[v]!;
    }
    return v;
  };
  for (let s = 0; s < n; s += 1)
    for (const t of out[s]!) {
      const [a, b] = [find(s), find(t)];
      if (a !== b) parent[Math.max(a, b)] = Math.min(a, b);
    }
  const groups = new Map<number, number[]>();
  for (let v = 0; v < n; v += 1) {
    const root = find(v);
    const group = groups.get(root);
    if (group) group.push(v);
    else groups.set(root, [v]);
  }
  return [...groups.values()];
}

/** A component's layers (longest path from its sources) and its edges split by virtual nodes into edges
 * between adjacent layers. */
function expand(members: number[], out: number[][]): Component {
  const local = new Map<number, number>();
  members.forEach((node, v) => local.set(node, v));
  const size = members.length;
  const indegree = new Uint32Array(size);
  for (const node of members)
    for (const t of out[node]!) {
      const at = local.get(t)!;
      indegree[at] = indegree[at]! + 1;
    }
  const layer = new Array<number>(size).fill(0);
  const queue: number[] = [];
  for (let v = 0; v < size; v += 1) if (indegree[v] === 0) queue.push(v);
  for (let head = 0; head < queue.length; head += 1) {
    const v = queue[head]!;
    for (const target of out[members[v]!]!) {
      const t = local.get(target)!;
      layer[t] = Math.max(layer[t]!, layer[v]! + 1);
      indegree[t] = indegree[t]! - 1;
      if (indegree[t] === 0) queue.push(t);
    }
  }
  const longest = longestSpan(members, out, local, layer);
  const up: number[][] = members.map(() => []);
  const down: number[][] = members.map(() => []);
  for (let v = 0; v < size; v += 1)
    for (const target of out[members[v]!]!) {
      let from = v;
      const t = local.get(target)!;
      if (layer[t]! - layer[v]! > longest) continue;
      for (let at = layer[v]! + 1; at < layer[t]!; at += 1) {
        const dummy = layer.length;
        layer.push(at);
        up.push([from]);
        down.push([]);
        down[from]!.push(dummy);
        from = dummy;
      }
      down[from]!.push(t);
      up[t]!.push(from);
    }
  let layers = 1;
  for (let v = 0; v < size; v += 1) layers = Math.max(layers, layer[v]! + 1);
  return { real: members, layer, up, down, layers };
}

/** The longest edge (in layers) given virtual nodes: every edge, unless their virtual nodes would pass
 * ``VIRTUAL_PER_NODE`` per node (a few edges spanning hundreds of layers can make that quadratic); then the
 * shortest edges first, and the longer ones are left out of ordering and placement (still drawn). */
function longestSpan(
  members: number[],
  out: number[][],
  local: Map<number, number>,
  layer: number[],
): number {
  const spans: number[] = [];
  for (let v = 0; v < members.length; v += 1)
    for (const target of out[members[v]!]!) spans.push(layer[local.get(target)!]! - layer[v]!);
  spans.sort((a, b) => a - b);
  const budget = Math.max(VIRTUAL_MIN, VIRTUAL_PER_NODE * members.length);
  let virtual = 0;
  for (let i = 0; i < spans.length; i += 1) {
    virtual += spans[i]! - 1;
    // every edge of this span and longer is left out (edges of span 1 have no virtual nodes: always in)
    if (virtual > budget) return spans[i]! - 1;
  }
  return Infinity;
}

/** Each layer's nodes top to bottom: barycenter sweeps down and up from the order of first appearance,
 * keeping the order with the fewest crossings seen. */
function orderLayers(c: Component): number[][] {
  let order: number[][] = Array.from({ length: c.layers }, () => []);
  for (let v = 0; v < c.layer.length; v += 1) order[c.layer[v]!]!.push(v);
  const rank = new Float64Array(c.layer.length);
  const setRanks = (layer: number[]) => layer.forEach((v, i) => (rank[v] = i));
  order.forEach(setRanks);
  let best = order.map((layer) => [...layer]);
  let fewest = crossings(c, order, rank);
  const sortBy = (layer: number[], neighbours: number[][]): number[] => {
    const key = new Map<number, number>();
    for (const v of layer) {
      const near = neighbours[v]!;
      let sum = 0;
      for (const u of near) sum += rank[u]!;
      // a node without neighbours on that side keeps its place
      key.set(v, near.length ? sum / near.length : rank[v]!);
    }
    return [...layer].sort((a, b) => key.get(a)! - key.get(b)! || rank[a]! - rank[b]!);
  };
  for (let sweep = 0; sweep < ORDER_SWEEPS && fewest > 0; sweep += 1) {
    for (let i = 1; i < c.layers; i += 1) setRanks((order[i] = sortBy(order[i]!, c.up)));
    for (let i = c.layers - 2; i >= 0; i -= 1) setRanks((order[i] = sortBy(order[i]!, c.down)));
    const count = crossings(c, order, rank);
    if (count < fewest) {
      fewest = count;
      best = order.map((layer) => [...layer]);
    }
  }
  order = best;
  return order;
}

/** Edge crossings between adjacent layers (inversions counted with a Fenwick tree): O(E log V). */
function crossings(c: Component, order: number[][], rank: Float64Array): number {
  let total = 0;
  for (let i = 0; i + 1 < order.length; i += 1) {
    const below = order[i + 1]!.length;
    const tree = new Uint32Array(below + 1);
    let added = 0;
    for (const v of order[i]!) {
      const targets = c.down[v]!.map((t) => rank[t]!).sort((a, b) => a - b);
      for (const t of targets) {
        // edges added before this one that end below it cross it
        let atOrAbove = 0;
        for (let k = t + 1; k > 0; k -= k & -k) atOrAbove += tree[k]!;
        total += added - atOrAbove;
      }
      for (const t of targets) {
        for (let k = t + 1; k <= below; k += k & -k) tree[k] = tree[k]! + 1;
        added += 1;
      }
    }
  }
  return total;
}

/** Vertical centres: layers packed, then each layer pulled towards its neighbours' medians, in sweeps down
 * and up, placed in order without overlap as close as possible to those targets (least squares). */
function place(c: Component, order: number[][]): Float64Array {
  const y = new Float64Array(c.layer.length);
  const height = (v: number) => (v < c.real.length ? NODE_HEIGHT : VIRTUAL_HEIGHT);
  for (const layer of order) {
    let at = 0;
    layer.forEach((v, i) => {
      if (i > 0) at += (height(layer[i - 1]!) + height(v)) / 2 + NODE_SPACING;
      y[v] = at;
    });
  }
  const align = (layer: number[], neighbours: number[][]) => {
    // a long edge's virtual node counts twice: a long edge's ends line up with it, so React Flow's line
    // between them runs where its virtual nodes kept room, not through the nodes of the layers it passes
    const wanted = layer.map(
      (v) => median(neighbours[v]!.flatMap((u) => (u < c.real.length ? [y[u]!] : [y[u]!, y[u]!]))) ?? y[v]!,
    );
    const placed = pack(
      wanted,
      layer.map(height),
      layer.map((v) => (v < c.real.length ? 1 : 2)), // long edges kept straight before short ones
    );
    layer.forEach((v, i) => (y[v] = placed[i]!));
  };
  for (let sweep = 0; sweep < PLACE_SWEEPS; sweep += 1) {
    for (let i = 1; i < order.length; i += 1) align(order[i]!, c.up);
    for (let i = order.length - 2; i >= 0; i -= 1) align(order[i]!, c.down);
  }
  return y;
}

function median(values: number[]): number | undefined {
  if (!values.length) return undefined;
  const sorted = values.sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** Positions in the given order, each at least its minimum distance below the one before, minimising the
 * weighted squared distance to ``wanted`` (pool adjacent violators on positions less their offsets). */
export function pack(wanted: number[], heights: number[], weights: number[]): number[] {
  const offset: number[] = [];
  let at = 0;
  wanted.forEach((_, i) => {
    if (i > 0) at += (heights[i - 1]! + heights[i]!) / 2 + NODE_SPACING;
    offset.push(at);
  });
  // blocks of consecutive items sharing one shifted position: [first index, weight, mean]
  const blocks: [number, number, number][] = [];
  wanted.forEach((w, i) => {
    let block: [number, number, number] = [i, weights[i]!, w - offset[i]!];
    while (blocks.length && blocks[blocks.length - 1]![2] >= block[2]) {
      const [first, weight, mean] = blocks.pop()!;
      const total = weight + block[1];
      block = [first, total, (mean * weight + block[2] * block[1]) / total];
    }
    blocks.push(block);
  });
  const placed = new Array<number>(wanted.length);
  blocks.forEach(([first, , mean], b) => {
    const end = b + 1 < blocks.length ? blocks[b + 1]![0] : wanted.length;
    for (let i = first; i < end; i += 1) placed[i] = mean + offset[i]!;
  });
  return placed;
}
