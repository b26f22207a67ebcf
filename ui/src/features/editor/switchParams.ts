// Pure: a SWITCH task's params as Porpoise stores them (engine/workflows/logic.py: ``{"cases": [{"condition",
// "next"}], "default"}``, DolphinScheduler's switchResult.dependTaskList and nextNode) and the labels its
// branches put on the DAG's edges.
import { upstreamOf, type TaskSpec } from "../graph/buildGraph";
import { tEditor } from "./strings";

export interface SwitchCase {
  condition: string;
  next: string;
}

export interface SwitchParams {
  cases: SwitchCase[];
  default?: string;
}

export function switchOf(params: Record<string, unknown> | undefined): SwitchParams {
  const cases = Array.isArray(params?.cases) ? params.cases : [];
  return {
    cases: cases.map((c) => {
      const item = (c && typeof c === "object" ? c : {}) as Record<string, unknown>;
      return { condition: String(item.condition ?? ""), next: String(item.next ?? "") };
    }),
    default: typeof params?.default === "string" && params.default ? params.default : undefined,
  };
}

/** ``params`` with the branches replaced (the other params kept; no default: the key removed). */
export function withSwitch(params: Record<string, unknown>, sw: SwitchParams): Record<string, unknown> {
  const next: Record<string, unknown> = { ...params, cases: sw.cases };
  if (sw.default) next.default = sw.default;
  else delete next.default;
  return next;
}

/** The tasks a branch of ``task`` needs linked below it and not linked yet. */
export function missingLinks(task: string, sw: SwitchParams, tasks: readonly TaskSpec[]): string[] {
  const wanted = new Set([...sw.cases.map((c) => c.next), sw.default ?? ""].filter(Boolean));
  return tasks.filter((t) => wanted.has(t.name) && !upstreamOf(t).includes(task)).map((t) => t.name);
}

const MAX_LABEL = 32;

/** Edge id (``up->down``) -> the label of a SWITCH branch on it: its condition, or "default". */
export function branchLabels(
  tasks: readonly (TaskSpec & { params?: Record<string, unknown> })[],
): Map<string, string> {
  const out = new Map<string, string>();
  for (const t of tasks) {
    if (t.type !== "SWITCH") continue;
    const sw = switchOf(t.params);
    const add = (next: string, label: string) => {
      const id = `${t.name}->${next}`;
      const shown = label.length > MAX_LABEL ? `${label.slice(0, MAX_LABEL - 1)}…` : label;
      out.set(id, out.has(id) ? `${out.get(id)} | ${shown}` : shown);
    };
    for (const c of sw.cases) if (c.next) add(c.next, c.condition);
    if (sw.default) add(sw.default, tEditor.edgeDefault);
  }
  return out;
}
