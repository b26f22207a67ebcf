// Every user-visible string of the DAG view (Chinese: strings.zh.ts).

export const tGraph = {
  /** a node's accessible name: its task, type and state ("load, SQL, running"), its visible text first */
  node: (name: string, type: string, state?: string) => `${name}, ${type}${state ? `, ${state}` : ""}`,
  refused: (reason: string) => `error: ${reason}`,
} as const;
