// The layered layout's Web Worker (layout.ts starts it): a graph in, its node positions out, off the main
// thread. A small module of its own, so a big graph's layout never waits for elkjs's 1.6 MB worker to load.
import { layeredLayout } from "./layered";

/** A graph to lay out: node ids and [source, target] pairs. */
export interface LayeredRequest {
  id: number;
  nodes: string[];
  edges: [string, string][];
}

/** Positions as [node id, x, y] rows, or why there are none. */
export type LayeredAnswer =
  { id: number; positions: [string, number, number][] } | { id: number; error: string };

self.onmessage = (event: MessageEvent<LayeredRequest>) => {
  const { id, nodes, edges } = event.data;
  let answer: LayeredAnswer;
  try {
    const at = layeredLayout({
      nodes: nodes.map((node) => ({ id: node, type: "", disabled: false })),
      edges: edges.map(([source, target]) => ({ id: "", source, target })),
    });
    answer = { id, positions: [...at].map(([node, { x, y }]) => [node, x, y]) };
  } catch (error) {
    answer = { id, error: String(error) };
  }
  self.postMessage(answer);
};
