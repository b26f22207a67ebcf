// The code editor (CodeMirror 6), loaded on demand by CodeField.tsx: its own chunk, so the first screens do
// not carry it. Tab indents; Escape then Tab leaves the editor (CodeMirror's tab-focus mode), as the hint
// under the editor says. Styles come from style-mod's constructed sheets, which the app's
// Content-Security-Policy (style-src 'self' 'unsafe-inline') allows; nothing is evaluated.
import { defaultKeymap, history, historyKeymap, indentWithTab } from "@codemirror/commands";
import { python } from "@codemirror/lang-python";
import { PostgreSQL, sql } from "@codemirror/lang-sql";
import {
  bracketMatching,
  defaultHighlightStyle,
  StreamLanguage,
  syntaxHighlighting,
  type LanguageSupport,
} from "@codemirror/language";
import { shell } from "@codemirror/legacy-modes/mode/shell";
import { EditorState, type Extension } from "@codemirror/state";
import { EditorView, keymap, lineNumbers } from "@codemirror/view";

export type CodeLanguage = "shell" | "python" | "sql" | "text";

function language(lang: CodeLanguage): Extension {
  const byName: Record<CodeLanguage, () => Extension | LanguageSupport> = {
    shell: () => StreamLanguage.define(shell),
    python: () => python(),
    sql: () => sql({ dialect: PostgreSQL }),
    text: () => [],
  };
  return byName[lang]();
}

export interface Mounted {
  /** show ``text`` (a change from elsewhere: the text view, an undo of the page) */
  set(text: string): void;
  destroy(): void;
}

export function mountEditor(
  parent: HTMLElement,
  options: {
    /** the id of the editable element (a <label for> names it) */
    id: string;
    doc: string;
    lang: CodeLanguage;
    label: string;
    describedBy?: string;
    onChange: (text: string) => void;
  },
): Mounted {
  const view = new EditorView({
    parent,
    state: EditorState.create({
      doc: options.doc,
      extensions: [
        lineNumbers(),
        history(),
        bracketMatching(),
        syntaxHighlighting(defaultHighlightStyle),
        language(options.lang),
        keymap.of([...defaultKeymap, ...historyKeymap, indentWithTab]),
        EditorView.contentAttributes.of({
          id: options.id,
          "aria-label": options.label,
          ...(options.describedBy ? { "aria-describedby": options.describedBy } : {}),
        }),
        EditorView.updateListener.of((u) => {
          if (u.docChanged) options.onChange(u.state.doc.toString());
        }),
      ],
    }),
  });
  return {
    set(text) {
      if (text !== view.state.doc.toString())
        view.dispatch({ changes: { from: 0, to: view.state.doc.length, insert: text } });
    },
    destroy: () => view.destroy(),
  };
}
