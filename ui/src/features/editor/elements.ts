// Pure: the editor's React Flow nodes and edges from the draft, reusing the previous objects of everything
// that did not change, so an edit of one task re-renders one node, not a thousand.
import type { Edge, Node } from "@xyflow/react";

import type { GraphEdge } from "../graph/buildGraph";
import { isGroupId, type GroupSummary } from "../graph/collapse";
import type { TaskNodeData } from "../graph/DagView";
import type { GroupNodeType } from "../graph/GroupNode";
import { nodeLabel } from "../graph/keyboard";
import { PRESIZED } from "../graph/layout";
import type { DraftTask } from "./draft";

export type TaskNode = Node<TaskNodeData, "task">;
/** What the editor draws: tasks, and collapsed groups of tasks. */
export type EditorNode = TaskNode | GroupNodeType;
export type XY = { x: number; y: number };

function sameData(a: TaskNodeData, b: TaskNodeData): boolean {
  return a.name === b.name && a.type === b.type && a.state === b.state && a.error === b.error;
}

/** Nodes for ``tasks``: a node keeps its position (else ``place(name)``) and its selection, and its
 * object when its data is unchanged. */
export function syncNodes(
  prev: readonly EditorNode[],
  tasks: readonly DraftTask[],
  place: (name: string) => XY,
  errors: ReadonlyMap<string, string>,
): TaskNode[] {
  const before = new Map<string, TaskNode>();
  for (const n of prev) if (n.type === "task") before.set(n.id, n);
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
      ariaLabel: nodeLabel(data),
      ...PRESIZED,
    };
  });
}

/** Edges for the drawn links (``collapsedGraph``), reusing the objects of those already drawn; an edge to or
 * from a group stands for several links and is not deleted by hand. */
export function syncEdges(
  prev: readonly Edge[],
  drawn: readonly GraphEdge[],
  labels: ReadonlyMap<string, string> = new Map(),
): Edge[] {
  const before = new Map(prev.map((e) => [e.id, e]));
  return drawn.map((e) => {
    const old = before.get(e.id);
    const label = labels.get(e.id);
    if (old && old.label === label) return old;
    const grouped = isGroupId(e.source) || isGroupId(e.target);
    const edge: Edge = grouped
      ? { id: e.id, source: e.source, target: e.target, deletable: false }
      : { id: e.id, source: e.source, target: e.target };
    return label === undefined ? edge : { ...edge, ...labelled(label) };
  });
}

/** How an edge shows a SWITCH branch's label (switchParams.ts branchLabels). */
export function labelled(label: string): Partial<Edge> {
  return { label, labelBgPadding: [4, 2], labelShowBg: true, className: "branch-edge" };
}

/** Nodes for the collapsed groups: placed like tasks, the object kept while its summary is the same. */
export function syncGroupNodes(
  prev: readonly EditorNode[],
  groups: readonly GroupSummary[],
  place: (id: string) => XY,
  onExpand: (id: string) => void,
): GroupNodeType[] {
  const before = new Map(prev.map((n) => [n.id, n]));
  return groups.map((summary) => {
    const old = before.get(summary.id);
    if (old?.type === "collapsed" && JSON.stringify(old.data.summary) === JSON.stringify(summary)) return old;
    return {
      id: summary.id,
      type: "collapsed",
      position: old?.position ?? place(summary.id),
      selected: old?.selected ?? false,
      deletable: false,
      connectable: false,
      data: { summary, onExpand },
      ...PRESIZED,
    };
  });
}

/** Where a new task goes: right of ``near`` when given (below what is already there), else ``fallback``. */
export function placeNew(nodes: readonly EditorNode[], near: XY | undefined, fallback: XY): XY {
  if (!near) return fallback;
  const x = near.x + 240;
  let y = near.y;
  const taken = nodes.filter((n) => Math.abs(n.position.x - x) < 100);
  while (taken.some((n) => Math.abs(n.position.y - y) < 50)) y += 64;
  return { x, y };
}
