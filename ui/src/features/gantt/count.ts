import { statesByName } from "../graph/buildGraph";

interface Listed {
  name: string;
  current: boolean;
  finished: boolean;
  state: string;
}

/** How many of an instance's tasks finished, and how many a branch skipped: one per task (its latest
 * attempt), never one per attempt. */
export function finishedCount(tasks: readonly Listed[]): { done: number; skipped: number } {
  const latest = [...statesByName(tasks).values()];
  return {
    done: latest.filter((t) => t.finished).length,
    skipped: latest.filter((t) => t.state === "SKIPPED").length,
  };
}
