// Pure: a workflow document's tasks -> graph nodes and edges (what the layout and the renderer need).

export interface TaskSpec {
  name: string;
  type: string;
  upstream?: string | string[];
  disabled?: boolean;
}

export interface GraphNode {
  id: string;
  type: string;
  disabled: boolean;
}

export interface GraphEdge {
  id: string;
  source: string;
  target: string;
}

export interface Graph {
  nodes: GraphNode[];
  edges: GraphEdge[];
  /** upstream names that are not tasks of the document (shown as a warning, never drawn) */
  dangling: string[];
}

export function upstreamOf(task: TaskSpec): string[] {
  if (task.upstream === undefined) return [];
  return typeof task.upstream === "string" ? [task.upstream] : task.upstream;
}

export function buildGraph(tasks: readonly TaskSpec[]): Graph {
  const names = new Set(tasks.map((t) => t.name));
  const nodes = tasks.map((t) => ({ id: t.name, type: t.type, disabled: Boolean(t.disabled) }));
  const edges: GraphEdge[] = [];
  const dangling: string[] = [];
  for (const task of tasks) {
    for (const up of upstreamOf(task)) {
      if (names.has(up)) edges.push({ id: `${up}->${task.name}`, source: up, target: task.name });
      else dangling.push(up);
    }
  }
  return { nodes, edges, dangling };
}

/** Task name -> its current attempt (the latest attempt wins; disabled tasks have no id). */
export function statesByName<T extends { name: string; current: boolean }>(
  tasks: readonly T[],
): Map<string, T> {
  const out = new Map<string, T>();
  for (const t of tasks) if (t.current || !out.has(t.name)) out.set(t.name, t);
  return out;
}
