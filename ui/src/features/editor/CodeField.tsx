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
  invalid = false,
  onChange,
}: {
  id: string;
  label: string;
  value: string;
  mediaType?: string;
  describedBy?: string;
  /** refused (aria-invalid): a refused save moves the focus here (components/focusInvalid.ts) */
  invalid?: boolean;
  onChange: (text: string) => void;
}) {
  const host = useRef<HTMLDivElement>(null);
  const editor = useRef<Mounted | null>(null);
  const [ready, setReady] = useState(false);
  const latest = useRef({ value, onChange, invalid, describedBy });
  latest.current = { value, onChange, invalid, describedBy };

  useEffect(() => {
    let live = true;
    void import("./codemirror").then(({ mountEditor }) => {
      if (!live || !host.current) return;
      editor.current = mountEditor(host.current, {
        id,
        doc: latest.current.value,
        lang: languageOf(mediaType),
        label,
        describedBy: latest.current.describedBy,
        onChange: (text) => latest.current.onChange(text),
      });
      mark(host.current, latest.current.invalid, latest.current.describedBy);
      setReady(true);
    });
    return () => {
      live = false;
      editor.current?.destroy();
      editor.current = null;
    };
  }, [id, mediaType, label]);

  useEffect(() => editor.current?.set(value), [value]);
  // the editor's content element is what takes the focus: it carries the field's validity
  // an error shown or gone changes these two only: the editor stays (with the focus a refused save gave it)
  useEffect(() => mark(host.current, invalid, describedBy), [invalid, describedBy, ready]);

  return (
    <div className="code-field" data-testid={`code-${id}`} data-ready={ready}>
      <div ref={host} className="code-editor" />
      {!ready && (
        <textarea
          id={id}
          aria-label={label}
          aria-describedby={describedBy}
          aria-invalid={invalid}
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

/** The editor's content element (what takes the focus) carries the field's validity and its description. */
function mark(host: HTMLElement | null, invalid: boolean, describedBy: string | undefined): void {
  const content = host?.querySelector(".cm-content");
  if (!content) return;
  content.setAttribute("aria-invalid", String(invalid));
  if (describedBy) content.setAttribute("aria-describedby", describedBy);
  else content.removeAttribute("aria-describedby");
}
