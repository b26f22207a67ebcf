// The DAG drawn with React Flow: HTML nodes, laid out once per version (layout.ts), states merged into
// the laid-out nodes on every change without running the layout again.
import {
  Background,
  Controls,
  Handle,
  MiniMap,
  Position,
  ReactFlow,
  type Edge,
  type Node,
  type NodeProps,
} from "@xyflow/react";
import "@xyflow/react/dist/style.css";
import { memo, useEffect, useMemo, useState } from "react";

import { ErrorBox, Loading } from "../../components/ErrorBox";
import { labelOf, symbolOf, toneOf } from "../../components/state";
import type { Graph } from "./buildGraph";
import { nodeLabel, selectOnKey } from "./keyboard";
import { layout, PRESIZED, type Positions } from "./layout";

export interface TaskNodeData extends Record<string, unknown> {
  name: string;
  type: string;
  state?: string;
  selected?: boolean;
  /** the server's reason this task was refused (editor) */
  error?: string;
  /** why this task is not running yet, in words (its master's reason: the instance page) */
  waiting?: string;
}

export const TaskNode = memo(function TaskNode({ data, selected }: NodeProps<Node<TaskNodeData>>) {
  const tone = data.error ? "bad" : data.state ? toneOf(data.state) : "none";
  return (
    <div
      className={`dag-node tone-${tone}${data.selected || selected ? " selected" : ""}`}
      data-testid={`node-${data.name}`}
      data-state={data.state ?? ""}
      title={data.error ?? data.waiting}
    >
      <Handle type="target" position={Position.Left} />
      <div className="dag-node-name" title={data.name}>
        {data.name}
      </div>
      <div className="dag-node-meta">
        <span className="dag-node-type">{data.type}</span>
        {data.error && (
          <span className="dag-node-state" data-testid="node-error">
            <span aria-hidden="true">⚠</span> error
          </span>
        )}
        {data.waiting && (
          <span className="dag-node-why" data-testid="node-waiting" role="img" aria-label={data.waiting}>
            ◷
          </span>
        )}
        {data.state && (
          <span className="dag-node-state">
            <span aria-hidden="true">{symbolOf(data.state)}</span> {labelOf(data.state)}
          </span>
        )}
      </div>
      <Handle type="source" position={Position.Right} />
    </div>
  );
});

export const nodeTypes = { task: TaskNode };

export function DagView({
  layoutKey,
  graph,
  states,
  waiting,
  selected,
  onSelect,
  labels,
}: {
  layoutKey: string;
  graph: Graph;
  /** edge id -> its label (a SWITCH branch: editor/switchParams.ts branchLabels) */
  labels?: ReadonlyMap<string, string>;
  states?: Map<string, string>;
  /** why each waiting task is not running yet, in words, by task name */
  waiting?: Map<string, string>;
  selected?: string | null;
  onSelect?: (name: string) => void;
}) {
  const [positions, setPositions] = useState<{ key: string; at: Positions } | null>(null);
  const [error, setError] = useState<unknown>(null);
  useEffect(() => {
    let live = true;
    layout(layoutKey, graph).then(
      (at) => live && setPositions({ key: layoutKey, at }),
      (exc: unknown) => live && setError(exc),
    );
    return () => {
      live = false;
    };
  }, [layoutKey, graph]);

  const edges: Edge[] = useMemo(
    () =>
      graph.edges.map((e) => {
        const label = labels?.get(e.id);
        const edge = { id: e.id, source: e.source, target: e.target };
        return label === undefined
          ? edge
          : { ...edge, label, labelBgPadding: [4, 2] as [number, number], className: "branch-edge" };
      }),
    [graph, labels],
  );
  const nodes: Node<TaskNodeData>[] = useMemo(() => {
    if (!positions || positions.key !== layoutKey) return [];
    return graph.nodes.map((n) => {
      const data = {
        name: n.id,
        type: n.type,
        state: states?.get(n.id) ?? (n.disabled ? "DISABLED" : undefined),
        selected: n.id === selected,
        waiting: waiting?.get(n.id),
      };
      return {
        id: n.id,
        type: "task",
        position: positions.at.get(n.id) ?? { x: 0, y: 0 },
        data,
        // React Flow's group role, as the editor's nodes: named by its task, type and state (a button's name
        // would have to begin with its visible text, which axe checks, and the waiting mark breaks that)
        ariaLabel: nodeLabel(data),
        draggable: false,
        connectable: false,
        ...PRESIZED,
      };
    });
  }, [graph, positions, layoutKey, states, waiting, selected]);

  if (error) return <ErrorBox error={error} title="Graph layout failed" />;
  if (nodes.length === 0 && graph.nodes.length > 0) return <Loading what="graph layout" />;
  const big = graph.nodes.length > 300;
  return (
    <div className="dag" data-testid="dag" onKeyDown={onSelect && selectOnKey(onSelect)}>
      <ReactFlow
        nodes={nodes}
        edges={edges}
        nodeTypes={nodeTypes}
        // a big graph opens readable at its start (only the visible nodes are drawn), a small one fits
        fitView={!big}
        fitViewOptions={{ maxZoom: 1 }}
        defaultViewport={{ x: 16, y: 16, zoom: 0.75 }}
        minZoom={0.05}
        onlyRenderVisibleElements={big}
        nodesDraggable={false}
        nodesConnectable={false}
        onNodeClick={(_, node) => onSelect?.(node.id)}
        proOptions={{ hideAttribution: true }}
      >
        <Background />
        <Controls showInteractive={false} />
        {graph.nodes.length > 30 && graph.nodes.length <= 500 && <MiniMap pannable zoomable />}
      </ReactFlow>
    </div>
  );
}
