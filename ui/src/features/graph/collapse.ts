// Pure: collapsing parts of a big DAG into group nodes, and the graph that is drawn then. A group is a set of
// tasks shown as one node (its count, task types and states); an edge between a group and anything else is
// drawn once however many links it stands for; links inside a group are not drawn. Groups never overlap:
// collapsing tasks of an existing group takes the whole group in. A collapse that would draw a cycle (a path
// leaves the set and comes back into it) is refused, so the drawn graph stays a DAG the layout can rank.
import { upstreamOf, type Graph, type GraphEdge, type TaskSpec } from "./buildGraph";
import { tCollapse } from "./collapseStrings";

export interface Group {
  /** ``group:<n>``: never a task name (task names have no colon) */
  id: string;
  /** the task it was collapsed from (a branch's root) or the first of the set */
  label: string;
  members: ReadonlySet<string>;
}

export type Groups = ReadonlyMap<string, Group>;

export const NO_GROUPS: Groups = new Map();

export function isGroupId(id: string): boolean {
  return id.startsWith("group:");
}

function downstreamOf(tasks: readonly TaskSpec[]): Map<string, string[]> {
  const down = new Map<string, string[]>();
  for (const t of tasks)
    for (const up of new Set(upstreamOf(t))) {
      const list = down.get(up);
      if (list) list.push(t.name);
      else down.set(up, [t.name]);
    }
  return down;
}

/** ``root`` and every task reachable only through it: a task belongs when all its upstream tasks do. */
export function branchOf(tasks: readonly TaskSpec[], root: string): Set<string> {
  const byName = new Map(tasks.map((t) => [t.name, t]));
  if (!byName.has(root)) return new Set();
  const down = downstreamOf(tasks);
  const inside = new Set([root]);
  // Kahn's order over the descendants of root: a task is decided once all its upstream tasks are
  const waiting = new Map<string, number>();
  const ready = [root];
  while (ready.length) {
    const at = ready.pop() as string;
    for (const next of down.get(at) ?? []) {
      const ups = upstreamOf(byName.get(next) as TaskSpec).filter((u) => byName.has(u));
      const left = (waiting.get(next) ?? new Set(ups).size) - 1;
      waiting.set(next, left);
      if (left > 0) continue;
      if (ups.every((u) => inside.has(u))) {
        inside.add(next);
        ready.push(next);
      }
    }
  }
  return inside;
}

/** Where each task is drawn: its group's id, or its own name. */
function drawnAs(groups: Groups): Map<string, string> {
  const out = new Map<string, string>();
  for (const g of groups.values()) for (const m of g.members) out.set(m, g.id);
  return out;
}

/** The drawn edges: links mapped to their ends' groups, inside a group dropped, each pair once. */
function drawnEdges(tasks: readonly TaskSpec[], groups: Groups): GraphEdge[] {
  const names = new Set(tasks.map((t) => t.name));
  const at = drawnAs(groups);
  const seen = new Set<string>();
  const edges: GraphEdge[] = [];
  for (const t of tasks)
    for (const up of upstreamOf(t)) {
      if (!names.has(up)) continue;
      const source = at.get(up) ?? up;
      const target = at.get(t.name) ?? t.name;
      const id = `${source}->${target}`;
      if (source === target || seen.has(id)) continue;
      seen.add(id);
      edges.push({ id, source, target });
    }
  return edges;
}

function hasCycle(ids: readonly string[], edges: readonly GraphEdge[]): boolean {
  const incoming = new Map(ids.map((id) => [id, 0]));
  const out = new Map<string, string[]>();
  for (const e of edges) {
    incoming.set(e.target, (incoming.get(e.target) ?? 0) + 1);
    const list = out.get(e.source);
    if (list) list.push(e.target);
    else out.set(e.source, [e.target]);
  }
  const ready = ids.filter((id) => incoming.get(id) === 0);
  let done = 0;
  while (ready.length) {
    const at = ready.pop() as string;
    done += 1;
    for (const next of out.get(at) ?? []) {
      const left = (incoming.get(next) ?? 0) - 1;
      incoming.set(next, left);
      if (left === 0) ready.push(next);
    }
  }
  return done < ids.length;
}

function nextGroupId(groups: Groups): string {
  let n = 1;
  for (const id of groups.keys()) n = Math.max(n, Number(id.slice("group:".length)) + 1 || n);
  return `group:${n}`;
}

/** Collapse ``names`` (tasks or group ids) into one group, absorbing the groups they touch; the new groups,
 * or the reason it cannot be done. */
export function collapse(
  tasks: readonly TaskSpec[],
  groups: Groups,
  names: Iterable<string>,
  label?: string,
): { groups: Groups; group?: Group; refused?: string } {
  const known = new Set(tasks.map((t) => t.name));
  const at = drawnAs(groups);
  const members = new Set<string>();
  const absorbed = new Set<string>();
  for (const name of names) {
    const gid = isGroupId(name) ? name : at.get(name);
    if (gid !== undefined) {
      const g = groups.get(gid);
      if (!g) continue;
      absorbed.add(gid);
      for (const m of g.members) members.add(m);
    } else if (known.has(name)) members.add(name);
  }
  if (members.size < 2) return { groups, refused: tCollapse.tooFew };
  const next = new Map([...groups].filter(([id]) => !absorbed.has(id)));
  const first = tasks.find((t) => members.has(t.name))?.name as string;
  const group: Group = { id: nextGroupId(groups), label: label ?? first, members };
  next.set(group.id, group);
  const view = collapsedGraph(tasks, next);
  if (
    hasCycle(
      view.nodes.map((n) => n.id),
      view.edges,
    )
  )
    return {
      groups,
      refused: tCollapse.cycle,
    };
  return { groups: next, group };
}

export function expand(groups: Groups, id: string): Groups {
  if (!groups.has(id)) return groups;
  const next = new Map(groups);
  next.delete(id);
  return next;
}

/** The groups still meaningful for ``tasks``: removed tasks leave their group; a group of one goes. The same
 * object when nothing changed. */
export function pruneGroups(groups: Groups, tasks: readonly TaskSpec[]): Groups {
  if (groups.size === 0) return groups;
  const names = new Set(tasks.map((t) => t.name));
  let changed = false;
  const next = new Map<string, Group>();
  for (const [id, g] of groups) {
    const members = new Set([...g.members].filter((m) => names.has(m)));
    if (members.size === g.members.size) next.set(id, g);
    else {
      changed = true;
      if (members.size > 1) next.set(id, { ...g, members });
    }
  }
  return changed ? next : groups;
}

/** The group a task is hidden in, if any. */
export function groupOfTask(groups: Groups, name: string): Group | undefined {
  for (const g of groups.values()) if (g.members.has(name)) return g;
  return undefined;
}

export interface GroupSummary {
  id: string;
  label: string;
  count: number;
  /** [type, how many], most first */
  types: [string, number][];
  /** [state, how many], most first (the editor's only state is DISABLED) */
  states: [string, number][];
}

function tally(values: readonly string[]): [string, number][] {
  const counts = new Map<string, number>();
  for (const v of values) counts.set(v, (counts.get(v) ?? 0) + 1);
  return [...counts].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]));
}

export function summarise(
  group: Group,
  tasks: readonly TaskSpec[],
  states?: ReadonlyMap<string, string>,
): GroupSummary {
  const inside = tasks.filter((t) => group.members.has(t.name));
  const stateOf = (t: TaskSpec) => states?.get(t.name) ?? (t.disabled ? "DISABLED" : undefined);
  return {
    id: group.id,
    label: group.label,
    count: inside.length,
    types: tally(inside.map((t) => t.type)),
    states: tally(inside.map(stateOf).filter((s): s is string => s !== undefined)),
  };
}

/** The graph as drawn: tasks outside groups, one node per group (type ``GROUP``), edges once. */
export function collapsedGraph(tasks: readonly TaskSpec[], groups: Groups): Graph {
  const at = drawnAs(groups);
  const nodes = tasks
    .filter((t) => !at.has(t.name))
    .map((t) => ({ id: t.name, type: t.type, disabled: Boolean(t.disabled) }));
  for (const g of groups.values()) nodes.push({ id: g.id, type: "GROUP", disabled: false });
  return { nodes, edges: drawnEdges(tasks, groups), dangling: [] };
}
