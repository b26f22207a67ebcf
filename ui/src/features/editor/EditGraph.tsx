// The editable graph: drag to move, drag from a node's right handle to another node to link them, Delete
// removes the selected tasks or links, the toolbar adds a task, finds one, or lays the graph out again.
// Positions live here (never in the document); the layout runs in the elkjs worker, only when the editor
// opens and on demand. Big graphs draw only the visible nodes.
import {
  applyEdgeChanges,
  applyNodeChanges,
  Background,
  Controls,
  MiniMap,
  Panel,
  ReactFlow,
  useReactFlow,
  type Connection,
  type Edge,
  type EdgeChange,
  type NodeChange,
} from "@xyflow/react";
import "@xyflow/react/dist/style.css";
import { useCallback, useEffect, useRef, useState, type FormEvent } from "react";

import { ErrorBox } from "../../components/ErrorBox";
import { buildGraph } from "../graph/buildGraph";
import { nodeTypes } from "../graph/DagView";
import { layout, NODE_HEIGHT, NODE_WIDTH, type Positions } from "../graph/layout";
import type { DraftTask } from "./draft";
import { placeNew, syncEdges, syncNodes, type TaskNode, type XY } from "./elements";

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

/** Fits a small graph into view once its layout arrived (a big one opens at its start, readable). */
function FitOnLayout({ laidOut, big }: { laidOut: boolean; big: boolean }) {
  const flow = useReactFlow();
  useEffect(() => {
    if (laidOut && !big) void flow.fitView({ maxZoom: 1 });
  }, [laidOut, big, flow]);
  return null;
}

function Toolbar({
  nodes,
  types,
  selected,
  hints,
  onAdd,
  onSelect,
  onLayout,
}: {
  nodes: readonly TaskNode[];
  types: readonly string[];
  selected: string | null;
  hints: PlaceHints;
  onAdd: (type: string) => string;
  onSelect: (name: string) => void;
  onLayout: () => void;
}) {
  const flow = useReactFlow();
  const [type, setType] = useState("SHELL");
  const [find, setFind] = useState("");
  const [missing, setMissing] = useState(false);

  const add = () => {
    const near = nodes.find((n) => n.id === selected)?.position;
    const pane = document.querySelector(".editor-graph .react-flow")?.getBoundingClientRect();
    const center = pane
      ? flow.screenToFlowPosition({ x: pane.left + pane.width / 2, y: pane.top + pane.height / 2 })
      : { x: 0, y: 0 };
    const at = placeNew(nodes, near, center);
    const name = onAdd(type);
    hints.set(name, at);
  };
  const search = (e: FormEvent) => {
    e.preventDefault();
    const needle = find.trim().toLowerCase();
    const hit =
      nodes.find((n) => n.id.toLowerCase() === needle) ??
      nodes.find((n) => n.id.toLowerCase().includes(needle));
    setMissing(!hit);
    if (!hit) return;
    onSelect(hit.id);
    void flow.setCenter(hit.position.x + NODE_WIDTH / 2, hit.position.y + NODE_HEIGHT / 2, {
      zoom: Math.max(flow.getZoom(), 0.8),
    });
  };
  return (
    <Panel position="top-left" className="editor-toolbar">
      <label>
        Task type{" "}
        <select value={type} onChange={(e) => setType(e.target.value)}>
          {types.map((t) => (
            <option key={t}>{t}</option>
          ))}
        </select>
      </label>
      <button onClick={add}>Add task</button>
      <button onClick={onLayout}>Auto layout</button>
      <form onSubmit={search} role="search">
        <input
          aria-label="Find a task"
          placeholder="find a task"
          value={find}
          aria-invalid={missing}
          onChange={(e) => setFind(e.target.value)}
        />
      </form>
      {missing && <span className="error-inline">no such task</span>}
    </Panel>
  );
}

export function EditGraph(props: EditGraphProps) {
  const { tasks, errors, selected, hints, onSelect, onConnect, onDisconnect, onRemove } = props;
  const [nodes, setNodes] = useState<TaskNode[]>([]);
  const [edges, setEdges] = useState<Edge[]>([]);
  const [layoutError, setLayoutError] = useState<unknown>(null);
  /** layouts applied so far (data-layouts: the benchmark waits on it) */
  const [layouts, setLayouts] = useState(0);
  const laidOut = layouts > 0;
  const tasksRef = useRef(tasks);
  tasksRef.current = tasks;

  const applyLayout = useCallback((at: Positions) => {
    setNodes((prev) => prev.map((n) => ({ ...n, position: at.get(n.id) ?? n.position })));
    setLayouts((n) => n + 1);
  }, []);

  // (before the first layout below: its positions apply to the nodes this makes)
  useEffect(() => {
    setNodes((prev) => {
      const byId = new Map(prev.map((n) => [n.id, n]));
      const place = (name: string): XY => {
        const hint = hints.get(name);
        if (typeof hint === "string") return byId.get(hint)?.position ?? gridSpot(byId.size);
        return hint ?? gridSpot(byId.size);
      };
      return syncNodes(prev, tasks, place, errors);
    });
    setEdges((prev) => syncEdges(prev, tasks));
  }, [tasks, errors, hints]);

  // the first layout (cached by version), once; positions kept from an earlier visit when all are known
  const firstKey = useRef(props.layoutKey);
  const kept = props.kept;
  const nodesRef = useRef(nodes);
  nodesRef.current = nodes;
  useEffect(() => {
    let live = true;
    const all = tasksRef.current;
    if (all.length > 0 && all.every((t) => kept.has(t.name))) applyLayout(new Map(kept));
    else
      layout(firstKey.current, buildGraph(all)).then(
        (at) => live && applyLayout(at),
        (exc: unknown) => live && setLayoutError(exc),
      );
    return () => {
      live = false;
      kept.clear();
      for (const n of nodesRef.current) kept.set(n.id, n.position);
    };
  }, [applyLayout, kept]);

  const relayout = () => {
    const shape = tasks.map((t) => t.name).join("\u0000");
    layout(`draft:relayout:${shape.length}:${Date.now()}`, buildGraph(tasks)).then(
      applyLayout,
      setLayoutError,
    );
  };

  // the selection chosen outside the graph (search, a refused field, the form) is the graph's too
  useEffect(() => {
    setNodes((prev) =>
      prev.map((n) =>
        Boolean(n.selected) === (n.id === selected) ? n : { ...n, selected: n.id === selected },
      ),
    );
  }, [selected]);

  const onNodesChange = useCallback(
    (changes: NodeChange<TaskNode>[]) => setNodes((nds) => applyNodeChanges(changes, nds)),
    [],
  );
  const onEdgesChange = useCallback(
    (changes: EdgeChange[]) => setEdges((eds) => applyEdgeChanges(changes, eds)),
    [],
  );
  const connect = useCallback(
    (c: Connection) => {
      if (c.source && c.target) onConnect(c.source, c.target);
    },
    [onConnect],
  );

  if (layoutError) return <ErrorBox error={layoutError} title="Graph layout failed" />;
  const big = tasks.length > BIG;
  return (
    <div className="dag editor-graph" data-testid="edit-graph" data-layouts={layouts}>
      <ReactFlow
        nodes={nodes}
        edges={edges}
        nodeTypes={nodeTypes}
        onNodesChange={onNodesChange}
        onEdgesChange={onEdgesChange}
        onConnect={connect}
        onNodeClick={(_, node) => onSelect(node.id)}
        onPaneClick={() => onSelect(null)}
        onNodesDelete={(gone) => onRemove(gone.map((n) => n.id))}
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
          onSelect={onSelect}
          onLayout={relayout}
        />
        <FitOnLayout laidOut={laidOut} big={big} />
        <Background />
        <Controls showInteractive={false} />
        {tasks.length > 30 && tasks.length <= 500 && <MiniMap pannable zoomable />}
      </ReactFlow>
    </div>
  );
}
