// A collapsed group of tasks drawn as one node: how many, their types and states (by name, not colour alone),
// and a button to expand it again. Links cannot start or end on it (they are links between tasks).
import { Handle, Position, type Node, type NodeProps } from "@xyflow/react";
import { memo } from "react";

import { labelOf } from "../../components/state";
import type { GroupSummary } from "./collapse";
import { tDag } from "./strings";

export interface GroupNodeData extends Record<string, unknown> {
  summary: GroupSummary;
  onExpand: (id: string) => void;
}

export type GroupNodeType = Node<GroupNodeData, "collapsed">;

/** "SHELL 5, SQL 2" (the first three, then "…"). */
export function tallyText(counts: readonly [string, number][], label = (s: string) => s): string {
  const shown = counts.slice(0, 3).map(([what, n]) => `${label(what)} ${n}`);
  return counts.length > 3 ? `${shown.join(", ")}, …` : shown.join(", ");
}

export const GroupNode = memo(function GroupNode({ data, selected }: NodeProps<GroupNodeType>) {
  const { summary, onExpand } = data;
  const states = tallyText(summary.states, labelOf);
  const detail = tDag.groupDetail(summary.count, tallyText(summary.types), states);
  return (
    <div
      className={`dag-node dag-group${selected ? " selected" : ""}`}
      data-testid={`group-${summary.label}`}
      data-count={summary.count}
      title={detail}
    >
      <Handle type="target" position={Position.Left} isConnectable={false} />
      <div className="dag-node-name">
        <span aria-hidden="true">⊞</span> {summary.label} <span className="muted">+{summary.count - 1}</span>
      </div>
      <div className="dag-node-meta">
        <span className="dag-node-type dag-group-tally">
          {tallyText(summary.types)}
          {states && `; ${states}`}
        </span>
        <button
          className="link nodrag"
          aria-label={tDag.expandGroup(summary.label, summary.count)}
          onClick={(e) => {
            e.stopPropagation();
            onExpand(summary.id);
          }}
        >
          {tDag.expand}
        </button>
      </div>
      <Handle type="source" position={Position.Right} isConnectable={false} />
    </div>
  );
});
