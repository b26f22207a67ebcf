// Pure: the editor's React Flow nodes and edges from the draft, reusing the previous objects of everything
// that did not change, so an edit of one task re-renders one node, not a thousand.
import type { Edge, Node } from "@xyflow/react";

import { upstreamOf } from "../graph/buildGraph";
import type { TaskNodeData } from "../graph/DagView";
import type { DraftTask } from "./draft";

export type TaskNode = Node<TaskNodeData>;
export type XY = { x: number; y: number };

function sameData(a: TaskNodeData, b: TaskNodeData): boolean {
  return a.name === b.name && a.type === b.type && a.state === b.state && a.error === b.error;
}

/** Nodes for ``tasks``: a node keeps its position (else ``place(name)``) and its selection, and its
 * object when its data is unchanged. */
export function syncNodes(
  prev: readonly TaskNode[],
  tasks: readonly DraftTask[],
  place: (name: string) => XY,
  errors: ReadonlyMap<string, string>,
): TaskNode[] {
  const before = new Map(prev.map((n) => [n.id, n]));
  return tasks.map((t) => {
    const data: TaskNodeData = {
      name: t.name,
      type: t.type,
      state: t.disabled ? "DISABLED" : undefined,
      error: errors.get(t.name),
    };
    const old = before.get(t.name);
    if (old && sameData(old.data, data)) return old;
    return {
      id: t.name,
      type: "task",
      position: old?.position ?? place(t.name),
      selected: old?.selected ?? false,
      data,
    };
  });
}

export function syncEdges(prev: readonly Edge[], tasks: readonly DraftTask[]): Edge[] {
  const names = new Set(tasks.map((t) => t.name));
  const before = new Map(prev.map((e) => [e.id, e]));
  const out: Edge[] = [];
  for (const t of tasks)
    for (const up of upstreamOf(t)) {
      if (!names.has(up)) continue;
      const id = `${up}->${t.name}`;
      out.push(before.get(id) ?? { id, source: up, target: t.name });
    }
  return out;
}

/** Where a new task goes: right of ``near`` when given (below what is already there), else ``fallback``. */
export function placeNew(nodes: readonly TaskNode[], near: XY | undefined, fallback: XY): XY {
  if (!near) return fallback;
  const x = near.x + 240;
  let y = near.y;
  const taken = nodes.filter((n) => Math.abs(n.position.x - x) < 100);
  while (taken.some((n) => Math.abs(n.position.y - y) < 50)) y += 64;
  return { x, y };
}
