// Pure patches of cached API answers with live state changes (no refetch for what the change says).
import type { InstanceDetail, InstancePage } from "../../api/client";

export interface Change {
  kind: "instance" | "task";
  id: number;
  state: string;
  instance?: number;
}

/** Workflow-instance states that are final (engine/master/states.py WORKFLOW_FINISHED). */
export const FINISHED_INSTANCE = new Set(["PAUSE", "STOP", "FAILURE", "SUCCESS"]);
export const FINISHED_TASK = new Set([
  "PAUSE",
  "STOP",
  "FAILURE",
  "SUCCESS",
  "KILL",
  "FORCED_SUCCESS",
  "NEED_FAULT_TOLERANCE",
]);

/** The page with the changed instances' states; ``missing``: instance ids it does not hold. */
export function patchInstancePage(
  page: InstancePage,
  changes: Change[],
): { page: InstancePage; missing: number[] } {
  const states = new Map<number, string>();
  for (const c of changes) if (c.kind === "instance") states.set(c.id, c.state);
  if (states.size === 0) return { page, missing: [] };
  const held = new Set(page.items.map((i) => i.id));
  const missing = [...states.keys()].filter((id) => !held.has(id));
  let touched = false;
  const items = page.items.map((item) => {
    const state = states.get(item.id);
    if (state === undefined || state === item.state) return item;
    touched = true;
    return { ...item, state: state as typeof item.state, finished: FINISHED_INSTANCE.has(state) };
  });
  return { page: touched ? { ...page, items } : page, missing };
}

/** The instance with its own and its tasks' new states; ``unknownTasks``: task ids not in it (new attempts). */
export function patchInstanceDetail(
  detail: InstanceDetail,
  changes: Change[],
): { detail: InstanceDetail; unknownTasks: number } {
  let next = detail;
  const tasks = new Map<number, string>();
  for (const c of changes) {
    if (c.kind === "instance" && c.id === detail.id && c.state !== next.state) {
      next = { ...next, state: c.state as typeof next.state, finished: FINISHED_INSTANCE.has(c.state) };
    } else if (c.kind === "task" && c.instance === detail.id) {
      tasks.set(c.id, c.state);
    }
  }
  if (tasks.size === 0) return { detail: next, unknownTasks: 0 };
  let unknown = tasks.size;
  const patched = next.tasks.map((t) => {
    if (t.id === null || t.id === undefined) return t;
    const state = tasks.get(t.id);
    if (state === undefined) return t;
    unknown -= 1;
    return state === t.state ? t : { ...t, state, finished: FINISHED_TASK.has(state) };
  });
  return { detail: { ...next, tasks: patched }, unknownTasks: unknown };
}
