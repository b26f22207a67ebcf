// Pure: the edits the graph editor makes to a workflow document. Every function returns a new document and
// keeps the objects of the tasks it does not touch (the graph reuses their nodes: no re-render).
import type { WorkflowDoc } from "../../api/client";
import { upstreamOf } from "../graph/buildGraph";
import { tEdits } from "./editStrings";

export type DraftTask = WorkflowDoc["tasks"][number];
export type Draft = WorkflowDoc;

/** A fresh name "<base>_<n>" that no task of ``draft`` has. */
export function freshName(draft: Draft, base: string): string {
  const taken = new Set(draft.tasks.map((t) => t.name));
  const stem = base.toLowerCase().replace(/[^a-z0-9_]+/g, "_") || "task";
  for (let n = 1; ; n += 1) if (!taken.has(`${stem}_${n}`)) return `${stem}_${n}`;
}

export function addTask(draft: Draft, task: DraftTask): Draft {
  return { ...draft, tasks: [...draft.tasks, task] };
}

function mapTasks(draft: Draft, fn: (t: DraftTask) => DraftTask): Draft {
  let changed = false;
  const tasks = draft.tasks.map((t) => {
    const next = fn(t);
    if (next !== t) changed = true;
    return next;
  });
  return changed ? { ...draft, tasks } : draft;
}

function withUpstream(task: DraftTask, upstream: string[]): DraftTask {
  const next = { ...task };
  if (upstream.length) next.upstream = upstream;
  else delete next.upstream;
  return next;
}

/** Would a link source -> target close a cycle (is source reachable from target)? */
export function wouldCycle(draft: Draft, source: string, target: string): boolean {
  if (source === target) return true;
  const down = new Map<string, string[]>();
  for (const t of draft.tasks)
    for (const up of upstreamOf(t)) down.set(up, [...(down.get(up) ?? []), t.name]);
  const seen = new Set<string>();
  const stack = [target];
  while (stack.length) {
    const at = stack.pop() as string;
    if (at === source) return true;
    if (seen.has(at)) continue;
    seen.add(at);
    stack.push(...(down.get(at) ?? []));
  }
  return false;
}

/** Link source -> target (target waits for source); the reason when it cannot be. */
export function connect(draft: Draft, source: string, target: string): { draft: Draft; refused?: string } {
  const task = draft.tasks.find((t) => t.name === target);
  if (!task || !draft.tasks.some((t) => t.name === source)) return { draft, refused: tEdits.unknownTask };
  if (upstreamOf(task).includes(source)) return { draft, refused: tEdits.alreadyWaits(target, source) };
  if (wouldCycle(draft, source, target)) return { draft, refused: tEdits.cycle(source, target) };
  return {
    draft: mapTasks(draft, (t) => (t === task ? withUpstream(t, [...upstreamOf(t), source]) : t)),
  };
}

export function disconnect(draft: Draft, source: string, target: string): Draft {
  return mapTasks(draft, (t) =>
    t.name === target && upstreamOf(t).includes(source)
      ? withUpstream(
          t,
          upstreamOf(t).filter((u) => u !== source),
        )
      : t,
  );
}

/** Remove tasks and every link to them. */
export function removeTasks(draft: Draft, names: ReadonlySet<string>): Draft {
  const kept = draft.tasks.filter((t) => !names.has(t.name));
  const out = mapTasks({ ...draft, tasks: kept }, (t) =>
    upstreamOf(t).some((u) => names.has(u))
      ? withUpstream(
          t,
          upstreamOf(t).filter((u) => !names.has(u)),
        )
      : t,
  );
  return out;
}

/** Replace one task (by its current name); a rename also renames the links to it. */
export function updateTask(draft: Draft, name: string, next: DraftTask): Draft {
  const renamed = next.name !== name;
  return mapTasks(draft, (t) => {
    if (t.name === name) return next;
    if (renamed && upstreamOf(t).includes(name))
      return withUpstream(
        t,
        upstreamOf(t).map((u) => (u === name ? next.name : u)),
      );
    return t;
  });
}

/** Where a server error points: a task (by index in the saved document) and the field inside it. */
export interface ErrorTarget {
  task?: number;
  /** path inside the task ("params.rawScript") or the document ("params", "name") */
  field: string;
}

export function errorTarget(field: string | undefined): ErrorTarget | null {
  if (!field) return null;
  const m = /^tasks\[(\d+)\](?:\.(.*))?$/.exec(field);
  if (m) return { task: Number(m[1]), field: m[2] ?? "" };
  return { field };
}
