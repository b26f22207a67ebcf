// The graph editor's panels: the toolbar (add a task of a type, lay out again, find a task) and the view's
// fitting and centring once a layout arrived.
import { Panel, useReactFlow } from "@xyflow/react";
import { useEffect, useState, type FormEvent } from "react";

import { NODE_HEIGHT, NODE_WIDTH } from "../graph/layout";
import type { PlaceHints } from "./EditGraph";
import { placeNew, type EditorNode } from "./elements";
import { tEditGraph as t } from "./strings";

/** Fits a small graph into view once its layout arrived (a big one opens at its start, readable); centres
 * on the task asked for (a search hit) once a layout placed it. */
export function FitOnLayout({
  layouts,
  big,
  nodes,
  centre,
  onCentred,
}: {
  layouts: number;
  big: boolean;
  nodes: readonly EditorNode[];
  centre: { name: string; after: number } | null;
  onCentred: () => void;
}) {
  const flow = useReactFlow();
  const laidOut = layouts > 0;
  useEffect(() => {
    if (laidOut && !big) void flow.fitView({ maxZoom: 1 });
  }, [laidOut, big, flow]);
  useEffect(() => {
    if (!centre || layouts < centre.after) return;
    const hit = nodes.find((n) => n.id === centre.name);
    if (!hit) return;
    onCentred();
    void flow.setCenter(hit.position.x + NODE_WIDTH / 2, hit.position.y + NODE_HEIGHT / 2, {
      zoom: Math.max(flow.getZoom(), 0.8),
    });
  }, [layouts, nodes, centre, onCentred, flow]);
  return null;
}

export function Toolbar({
  nodes,
  types,
  selected,
  hints,
  onAdd,
  onLayout,
  onFind,
}: {
  nodes: readonly EditorNode[];
  types: readonly string[];
  selected: string | null;
  hints: PlaceHints;
  onAdd: (type: string) => string;
  onLayout: () => void;
  /** a task by name, including those hidden in a group */
  onFind: (needle: string) => boolean;
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
    setMissing(!onFind(find.trim().toLowerCase()));
  };
  return (
    <Panel position="top-left" className="editor-toolbar">
      <label>
        {t.taskType}{" "}
        <select value={type} onChange={(e) => setType(e.target.value)}>
          {types.map((t) => (
            <option key={t}>{t}</option>
          ))}
        </select>
      </label>
      <button onClick={add}>{t.addTask}</button>
      <button onClick={onLayout}>{t.autoLayout}</button>
      <form onSubmit={search} role="search">
        <input
          aria-label={t.find}
          placeholder={t.findPlaceholder}
          value={find}
          aria-invalid={missing}
          onChange={(e) => setFind(e.target.value)}
        />
      </form>
      {missing && <span className="error-inline">{t.noSuchTask}</span>}
    </Panel>
  );
}
