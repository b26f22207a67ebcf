// Pure: the rendered-script blocks at the head of a task's log (engine/worker/rendered.py writes them:
// ``[porpoise] rendered <field> (<n> lines):``, the n lines, ``[porpoise] end of rendered <field>``).

export interface RenderedBlock {
  field: string;
  text: string;
  /** the log's first lines held only part of it */
  partial: boolean;
}

const BEGIN = /^\[porpoise\] rendered (\S+) \((\d+) lines\):$/;

/** The lines of a log's head a reader fetches: the header, a block of this many lines and its end. */
export const HEAD_LINES = 2000;

export function renderedBlocks(lines: readonly string[]): RenderedBlock[] {
  const out: RenderedBlock[] = [];
  let i = 0;
  while (i < lines.length) {
    const m = BEGIN.exec(lines[i] ?? "");
    if (!m) {
      // the blocks follow the header's first line: past them, the task's own output begins
      if (out.length > 0 || i > 0) break;
      i += 1;
      continue;
    }
    const field = m[1] ?? "";
    const n = Number(m[2]);
    const body = lines.slice(i + 1, i + 1 + n);
    out.push({ field, text: body.join("\n"), partial: body.length < n });
    i += n + 2;
  }
  return out;
}
