// The script or SQL an attempt ran, its placeholders resolved (secrets masked by the worker), read from the
// head of its log: shown in the task's detail on the instance page.
import { useLogHead } from "../../api/queries";
import { HEAD_LINES, renderedBlocks } from "./renderedScript";
import { tEditor } from "./strings";

export function RenderedScript({ taskId, started }: { taskId: number | null; started: boolean }) {
  const head = useLogHead(taskId, HEAD_LINES, started);
  if (!started || taskId === null) return null;
  if (head.isPending) return <div className="muted small">{tEditor.renderedLoading}</div>;
  const blocks = head.data ? renderedBlocks(head.data.lines) : [];
  if (blocks.length === 0) return <div className="muted small">{tEditor.renderedNone}</div>;
  return (
    <>
      {blocks.map((b) => (
        <details key={b.field} open className="rendered-script" data-testid="rendered-script">
          <summary>{tEditor.renderedScript(b.field)}</summary>
          <pre tabIndex={0}>
            {b.text}
            {b.partial ? "\n…" : ""}
          </pre>
        </details>
      ))}
    </>
  );
}
