// Every user-visible string of the DAG view (Chinese: strings.zh.ts).

export const tGraph = {
  /** a node's accessible name: its task, type and state ("load, SQL, running"), its visible text first */
  node: (name: string, type: string, state?: string) => `${name}, ${type}${state ? `, ${state}` : ""}`,
  refused: (reason: string) => `error: ${reason}`,
} as const;

/** The DAG view's own texts and a collapsed group's node (DagView.tsx, GroupNode.tsx, collapse.ts). */
export const tDag = {
  layoutFailed: "Graph layout failed",
  loading: "graph layout",
  error: "error",
  groupDetail: (count: number, types: string, states: string) =>
    `${count} tasks: ${types}${states ? `; ${states}` : ""}`,
  expandGroup: (label: string, count: number) => `Expand ${label} (${count} tasks)`,
  expand: "expand",
  tooFew: "choose at least two tasks (or a task with a branch)",
  cycle: "a path leaves these tasks and comes back into them: collapsing would draw a cycle",
} as const;
