// Every user-visible string of the DAG view (the UI has no i18n library yet: a translation replaces this module).

export const tGraph = {
  /** a node's accessible name: its task, type and state ("load, SQL, running"), its visible text first */
  node: (name: string, type: string, state?: string) => `${name}, ${type}${state ? `, ${state}` : ""}`,
  refused: (reason: string) => `error: ${reason}`,
} as const;
