// When a save's refusal is fixed: the value the server refused (a task's field, or the workflow's) changed
// since, so its message leaves the screen; and when a save must ask first (a project nobody can see yet).
import type { Draft } from "./draft";

/** The server's refusal, placed: on a task (by name) or the workflow, at a path inside it ("params.rawScript",
 * "upstream[0]", "" for the task itself). */
export interface Refusal {
  task?: string;
  field: string;
  message: string;
}

function valueAt(draft: Draft, refusal: Refusal): unknown {
  let at: unknown = draft;
  if (refusal.task !== undefined) at = draft.tasks.find((t) => t.name === refusal.task);
  for (const part of refusal.field.split(/[.[\]]/).filter(Boolean)) {
    if (at === null || typeof at !== "object") return undefined;
    at = (at as Record<string, unknown>)[part];
  }
  return at;
}

/** Whether the edit from ``before`` to ``after`` changed what ``refusal`` refused (a renamed or removed
 * task counts as changed). */
export function refusalFixed(before: Draft, after: Draft, refusal: Refusal): boolean {
  return JSON.stringify(valueAt(before, refusal)) !== JSON.stringify(valueAt(after, refusal));
}

/** The project a save would create (the caller sees none of that name): the save asks first. Undefined while
 * the caller's projects are not known, or when the project exists. */
export function projectToCreate(projects: readonly string[] | undefined, project: string | undefined) {
  const name = (project ?? "").trim();
  return projects !== undefined && name !== "" && !projects.includes(name) ? name : undefined;
}
