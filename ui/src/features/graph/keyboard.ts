// Keyboard use of the DAG: React Flow makes each node focusable (Tab); Enter or Space on a focused node selects
// it as a click does (the editor opens its form, the instance page its task's detail), and its accessible
// name says its task, type and state.
import type { KeyboardEvent } from "react";

import { labelOf } from "../../components/state";
import { tGraph } from "./strings";

/** The aria-label of a task's node. */
export function nodeLabel(data: { name: string; type: string; state?: string; error?: string }): string {
  const state = data.error ? tGraph.refused(data.error) : data.state ? labelOf(data.state) : undefined;
  return tGraph.node(data.name, data.type, state);
}

/** A keydown handler for the graph's container: Enter or Space on a focused node calls ``select`` with its id
 * (not on a field or button inside a node). */
export function selectOnKey(select: (id: string) => void) {
  return (event: KeyboardEvent<HTMLElement>) => {
    if (event.key !== "Enter" && event.key !== " ") return;
    const target = event.target as HTMLElement;
    const id = target.classList?.contains("react-flow__node") ? target.getAttribute("data-id") : null;
    if (!id) return;
    event.preventDefault();
    select(id);
  };
}
