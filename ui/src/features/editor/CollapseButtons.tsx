// The editor's collapse controls: the selected task's branch (it and what runs only after it) or the selected
// nodes (Shift / Ctrl + click, or Shift + drag a box) into one group node; expand every group again. A refusal
// (nothing to collapse, a cycle) is said next to the buttons.
import { Panel } from "@xyflow/react";
import { useState } from "react";

import type { TaskSpec } from "../graph/buildGraph";
import { branchOf, collapse, isGroupId, NO_GROUPS, type Groups } from "../graph/collapse";
import type { EditorNode } from "./elements";
import { tEditGraph as t } from "./strings";

export function CollapseButtons({
  tasks,
  groups,
  nodes,
  selected,
  onGroups,
}: {
  tasks: readonly TaskSpec[];
  groups: Groups;
  nodes: readonly EditorNode[];
  selected: string | null;
  onGroups: (groups: Groups) => void;
}) {
  const [refused, setRefused] = useState<string>();
  const chosen = nodes.filter((n) => n.selected).map((n) => n.id);
  const apply = (result: { groups: Groups; refused?: string }) => {
    setRefused(result.refused);
    if (!result.refused) onGroups(result.groups);
  };
  const branch = () => {
    if (!selected || isGroupId(selected)) return;
    const members = branchOf(tasks, selected);
    if (members.size < 2) return setRefused(t.noBranch(selected));
    apply(collapse(tasks, groups, members, selected));
  };
  return (
    <Panel position="top-right" className="editor-toolbar" aria-label={t.collapse}>
      <button disabled={!selected || isGroupId(selected)} onClick={branch} title={t.collapseBranchHelp}>
        {t.collapseBranch}
      </button>
      <button
        disabled={chosen.length < 2}
        onClick={() => apply(collapse(tasks, groups, chosen))}
        title={t.collapseSelectionHelp}
      >
        {t.collapseSelection}
      </button>
      {groups.size > 0 && (
        <button
          onClick={() => {
            setRefused(undefined);
            onGroups(NO_GROUPS);
          }}
        >
          {t.expandAll(groups.size)}
        </button>
      )}
      {refused && (
        <span className="error-inline" role="status">
          {refused}
        </span>
      )}
    </Panel>
  );
}
