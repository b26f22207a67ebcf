// A script or SQL parameter's input: a textarea at once, replaced by the highlighting editor (codemirror.ts,
// loaded on demand) once its chunk has arrived.
import { useEffect, useRef, useState } from "react";

import type { CodeLanguage, Mounted } from "./codemirror";
import { tEditor } from "./strings";

/** The editor's language from a schema's ``contentMediaType`` (text/x-shellscript, text/x-python, text/x-sql). */
export function languageOf(mediaType: string | undefined): CodeLanguage {
  if (!mediaType) return "text";
  if (mediaType.includes("shell")) return "shell";
  if (mediaType.includes("python")) return "python";
  if (mediaType.includes("sql")) return "sql";
  return "text";
}

export function CodeField({
  id,
  label,
  value,
  mediaType,
  describedBy,
  onChange,
}: {
  id: string;
  label: string;
  value: string;
  mediaType?: string;
  describedBy?: string;
  onChange: (text: string) => void;
}) {
  const host = useRef<HTMLDivElement>(null);
  const editor = useRef<Mounted | null>(null);
  const [ready, setReady] = useState(false);
  const latest = useRef({ value, onChange });
  latest.current = { value, onChange };

  useEffect(() => {
    let live = true;
    void import("./codemirror").then(({ mountEditor }) => {
      if (!live || !host.current) return;
      editor.current = mountEditor(host.current, {
        id,
        doc: latest.current.value,
        lang: languageOf(mediaType),
        label,
        describedBy,
        onChange: (text) => latest.current.onChange(text),
      });
      setReady(true);
    });
    return () => {
      live = false;
      editor.current?.destroy();
      editor.current = null;
    };
  }, [id, mediaType, label, describedBy]);

  useEffect(() => editor.current?.set(value), [value]);

  return (
    <div className="code-field" data-testid={`code-${id}`} data-ready={ready}>
      <div ref={host} className="code-editor" />
      {!ready && (
        <textarea
          id={id}
          aria-label={label}
          aria-describedby={describedBy}
          rows={5}
          spellCheck={false}
          value={value}
          onChange={(e) => onChange(e.target.value)}
        />
      )}
      <div className="muted small code-hint">{ready ? tEditor.codeHint : tEditor.codeLoading}</div>
    </div>
  );
}
