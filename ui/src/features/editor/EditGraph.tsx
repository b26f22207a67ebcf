// The editable graph: drag to move, drag from a node's right handle to another node to link them, Delete
// removes the selected tasks or links, the toolbar adds a task, finds one, or lays the graph out again.
// Positions live here (never in the document); the layout runs in the elkjs worker, only when the editor
// opens, on demand, and when a collapse or an expand changes what is drawn. Big graphs draw only the visible
// nodes; a branch or a selection collapses into one group node (graph/collapse.ts).
import {
  applyEdgeChanges,
  applyNodeChanges,
  Background,
  Controls,
  MiniMap,
  ReactFlow,
  type Connection,
  type Edge,
  type EdgeChange,
  type NodeChange,
} from "@xyflow/react";
import "@xyflow/react/dist/style.css";
import { useCallback, useEffect, useMemo, useRef, useState } from "react";

import { ErrorBox } from "../../components/ErrorBox";
import {
  collapsedGraph,
  expand,
  groupOfTask,
  isGroupId,
  pruneGroups,
  summarise,
  type Groups,
} from "../graph/collapse";
import { TaskNode } from "../graph/DagView";
import { GroupNode } from "../graph/GroupNode";
import { selectOnKey } from "../graph/keyboard";
import { layout, layoutOnce, NODE_HEIGHT, NODE_WIDTH, type Positions } from "../graph/layout";
import { CollapseButtons } from "./CollapseButtons";
import { FitOnLayout, Toolbar } from "./GraphPanels";
import type { DraftTask } from "./draft";
import { syncEdges, syncGroupNodes, syncNodes, type EditorNode, type XY } from "./elements";
import { branchLabels } from "./switchParams";

const nodeTypes = { task: TaskNode, collapsed: GroupNode };
const NONE: never[] = [];

/** Where a task that has no position yet goes: a name -> a position, or the name of the node it was
 * renamed from. The editor page fills it on a rename; the toolbar on an add. */
export type PlaceHints = Map<string, XY | string>;

const BIG = 300;

export interface EditGraphProps {
  tasks: readonly DraftTask[];
  /** the layout to start from (cached by the workflow's version) */
  layoutKey: string;
  errors: ReadonlyMap<string, string>;
  selected: string | null;
  hints: PlaceHints;
  /** positions kept while the graph is not shown (the text view): read on mount, written on unmount */
  kept: Map<string, XY>;
  types: readonly string[];
  /** collapsed groups (kept by the page across the text view) */
  groups: Groups;
  onGroups: (groups: Groups) => void;
  onSelect: (name: string | null) => void;
  onConnect: (source: string, target: string) => void;
  onDisconnect: (links: { source: string; target: string }[]) => void;
  onRemove: (names: string[]) => void;
  /** adds a task of the type and returns its name */
  onAdd: (type: string) => string;
}

function gridSpot(index: number): XY {
  return { x: (index % 10) * (NODE_WIDTH + 40), y: Math.floor(index / 10) * (NODE_HEIGHT + 30) };
}

/** Centre on a task once the layout count reaches ``after`` (a hidden task is placed by the next layout). */
interface Centre {
  name: string;
  after: number;
}

export function EditGraph(props: EditGraphProps) {
  const { tasks, errors, selected, hints, onSelect, onConnect, onDisconnect, onRemove, onGroups } = props;
  const [nodes, setNodes] = useState<EditorNode[]>([]);
  const [edges, setEdges] = useState<Edge[]>([]);
  const [layoutError, setLayoutError] = useState<unknown>(null);
  /** layouts applied so far (data-layouts: the benchmark waits on it) */
  const [layouts, setLayouts] = useState(0);
  const [centre, setCentre] = useState<Centre | null>(null);
  const groups = useMemo(() => pruneGroups(props.groups, tasks), [props.groups, tasks]);
  const drawn = useMemo(() => collapsedGraph(tasks, groups), [tasks, groups]);
  const shown = useMemo(() => {
    if (groups.size === 0) return tasks;
    const ids = new Set(drawn.nodes.map((n) => n.id));
    return tasks.filter((t) => ids.has(t.name));
  }, [tasks, groups, drawn]);
  const labels = useMemo(() => branchLabels(tasks), [tasks]);
  const summaries = useMemo(() => [...groups.values()].map((g) => summarise(g, tasks)), [groups, tasks]);
  const tasksRef = useRef(tasks);
  tasksRef.current = tasks;
  const groupsRef = useRef(groups);
  groupsRef.current = groups;
  const selectedRef = useRef(selected);
  selectedRef.current = selected;
  const layoutsRef = useRef(layouts);
  layoutsRef.current = layouts;
  /** the latest layout: places nodes that appear after it arrived (a group, tasks of an expanded one) */
  const lastLayout = useRef<Positions>(new Map());

  const applyLayout = useCallback((at: Positions) => {
    lastLayout.current = at;
    setNodes((prev) => prev.map((n) => ({ ...n, position: at.get(n.id) ?? n.position })));
    setLayouts((n) => n + 1);
  }, []);

  /** Lay out what is drawn now (not cached: a draft's shape is not a version). */
  const layoutNow = useCallback(
    (groupsNow: Groups) => {
      const all = tasksRef.current;
      layoutOnce(collapsedGraph(all, pruneGroups(groupsNow, all))).then(applyLayout, setLayoutError);
    },
    [applyLayout],
  );

  /** Collapse or expand: new groups, the selection dropped when it is hidden now, a new layout. */
  const regroup = useCallback(
    (next: Groups) => {
      onGroups(next);
      const chosen = selectedRef.current;
      if (chosen && groupOfTask(next, chosen)) onSelect(null);
      layoutNow(next);
    },
    [onGroups, onSelect, layoutNow],
  );
  const onExpand = useCallback((id: string) => regroup(expand(groupsRef.current, id)), [regroup]);

  // (before the first layout below: its positions apply to the nodes this makes)
  useEffect(() => {
    setNodes((prev) => {
      const byId = new Map(prev.map((n) => [n.id, n]));
      const place = (name: string): XY => {
        const hint = hints.get(name);
        if (typeof hint === "string") return byId.get(hint)?.position ?? gridSpot(byId.size);
        return hint ?? lastLayout.current.get(name) ?? gridSpot(byId.size);
      };
      const taskNodes: EditorNode[] = syncNodes(prev, shown, place, errors);
      return summaries.length
        ? taskNodes.concat(syncGroupNodes(prev, summaries, place, onExpand))
        : taskNodes;
    });
    setEdges((prev) => syncEdges(prev, drawn.edges, labels));
  }, [shown, summaries, drawn, errors, hints, onExpand, labels]);

  // the first layout (cached by version), once; positions kept from an earlier visit when all are known
  const firstKey = useRef(props.layoutKey);
  const kept = props.kept;
  const nodesRef = useRef(nodes);
  nodesRef.current = nodes;
  useEffect(() => {
    let live = true;
    const all = tasksRef.current;
    const now = groupsRef.current;
    const view = collapsedGraph(all, now);
    if (view.nodes.length > 0 && view.nodes.every((n) => kept.has(n.id))) applyLayout(new Map(kept));
    else if (now.size > 0) layoutNow(now);
    else
      layout(firstKey.current, view).then(
        (at) => live && applyLayout(at),
        (exc: unknown) => live && setLayoutError(exc),
      );
    return () => {
      live = false;
      kept.clear();
      for (const n of nodesRef.current) kept.set(n.id, n.position);
    };
  }, [applyLayout, layoutNow, kept]);

  const onFind = useCallback(
    (needle: string): boolean => {
      const all = tasksRef.current;
      const hit =
        all.find((t) => t.name.toLowerCase() === needle) ??
        all.find((t) => t.name.toLowerCase().includes(needle));
      if (!hit) return false;
      const inside = groupOfTask(groupsRef.current, hit.name);
      if (inside) regroup(expand(groupsRef.current, inside.id));
      setCentre({ name: hit.name, after: layoutsRef.current + (inside ? 1 : 0) });
      onSelect(hit.name);
      return true;
    },
    [regroup, onSelect],
  );

  // the selection chosen outside the graph (search, a refused field, the form) is the graph's too
  useEffect(() => {
    setNodes((prev) =>
      prev.map((n) =>
        Boolean(n.selected) === (n.id === selected) ? n : { ...n, selected: n.id === selected },
      ),
    );
  }, [selected]);

  const onNodesChange = useCallback(
    (changes: NodeChange<EditorNode>[]) => setNodes((nds) => applyNodeChanges(changes, nds)),
    [],
  );
  const onEdgesChange = useCallback(
    (changes: EdgeChange[]) => setEdges((eds) => applyEdgeChanges(changes, eds)),
    [],
  );
  const connect = useCallback(
    (c: Connection) => {
      if (c.source && c.target && !isGroupId(c.source) && !isGroupId(c.target)) onConnect(c.source, c.target);
    },
    [onConnect],
  );

  if (layoutError) return <ErrorBox error={layoutError} title="Graph layout failed" />;
  const big = tasks.length > BIG;
  return (
    <div
      className="dag editor-graph"
      data-testid="edit-graph"
      data-layouts={layouts}
      onKeyDown={selectOnKey((id) => !isGroupId(id) && onSelect(id))}
    >
      <ReactFlow
        // nothing before the first layout: unplaced nodes would all be in view, and all drawn
        nodes={layouts > 0 ? nodes : NONE}
        edges={layouts > 0 ? edges : NONE}
        nodeTypes={nodeTypes}
        onNodesChange={onNodesChange}
        onEdgesChange={onEdgesChange}
        onConnect={connect}
        // with Shift / Ctrl / Meta a click adds to React Flow's selection (to collapse a set)
        onNodeClick={(e, node) => !(e.shiftKey || e.ctrlKey || e.metaKey) && onSelect(node.id)}
        onPaneClick={() => onSelect(null)}
        onNodesDelete={(gone) => onRemove(gone.filter((n) => n.type === "task").map((n) => n.id))}
        onEdgesDelete={(gone) => onDisconnect(gone.map((e) => ({ source: e.source, target: e.target })))}
        deleteKeyCode={["Delete", "Backspace"]}
        defaultViewport={{ x: 16, y: 16, zoom: 0.75 }}
        fitView={!big}
        fitViewOptions={{ maxZoom: 1 }}
        minZoom={0.05}
        onlyRenderVisibleElements={big}
        proOptions={{ hideAttribution: true }}
      >
        <Toolbar
          nodes={nodes}
          types={props.types}
          selected={selected}
          hints={hints}
          onAdd={props.onAdd}
          onLayout={() => layoutNow(groupsRef.current)}
          onFind={onFind}
        />
        <CollapseButtons tasks={tasks} groups={groups} nodes={nodes} selected={selected} onGroups={regroup} />
        <FitOnLayout
          layouts={layouts}
          big={big}
          nodes={nodes}
          centre={centre}
          onCentred={() => setCentre(null)}
        />
        <Background />
        <Controls showInteractive={false} />
        {drawn.nodes.length > 30 && drawn.nodes.length <= 500 && <MiniMap pannable zoomable />}
      </ReactFlow>
    </div>
  );
}
