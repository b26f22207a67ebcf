// Edit a workflow as YAML or JSON text, with its graph redrawn as you type; save = a new version. The
// server checks the document (400 naming the field). New workflow: /workflows/new.
import { useQueryClient } from "@tanstack/react-query";
import { useEffect, useMemo, useState } from "react";
import { useNavigate, useParams } from "react-router";
import { parse, stringify } from "yaml";

import { api, call, type WorkflowDoc } from "../api/client";
import { useWorkflow } from "../api/queries";
import { ErrorBox, Loading } from "../components/ErrorBox";
import { buildGraph, type TaskSpec } from "../features/graph/buildGraph";
import { DagView } from "../features/graph/DagView";

const TEMPLATE = `name: my_workflow
project: default
tasks:
  - name: hello
    type: SHELL
    params:
      rawScript: echo hello
  - name: world
    type: SHELL
    upstream: [hello]
    params:
      rawScript: echo world
`;

/** The text as a document, or the reason it is not one. */
export function readDocument(text: string, format: "yaml" | "json"): { doc?: WorkflowDoc; problem?: string } {
  try {
    const doc = (format === "json" ? JSON.parse(text) : parse(text)) as unknown;
    if (!doc || typeof doc !== "object" || !Array.isArray((doc as { tasks?: unknown }).tasks)) {
      return { problem: "the document needs a tasks list" };
    }
    return { doc: doc as WorkflowDoc };
  } catch (exc) {
    return { problem: (exc as Error).message };
  }
}

/** A layout key from the graph's shape: the same tasks and links reuse the cached layout. */
function shapeKey(tasks: readonly TaskSpec[]): string {
  let h = 0;
  const text = JSON.stringify(tasks.map((t) => [t.name, t.type, t.upstream ?? null]));
  for (let i = 0; i < text.length; i += 1) h = (h * 31 + text.charCodeAt(i)) | 0;
  return `draft:${h}:${text.length}`;
}

export function Editor() {
  const param = useParams().code;
  const code = param === undefined ? null : Number(param);
  const existing = useWorkflow(code ?? 0);
  const navigate = useNavigate();
  const client = useQueryClient();
  const [format, setFormat] = useState<"yaml" | "json">("yaml");
  const [text, setText] = useState<string | null>(code === null ? TEMPLATE : null);
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);

  useEffect(() => {
    if (text === null && existing.data) setText(stringify(existing.data.document));
  }, [existing.data, text]);

  const read = useMemo(() => (text === null ? {} : readDocument(text, format)), [text, format]);
  const tasks = read.doc?.tasks as TaskSpec[] | undefined;
  const graph = useMemo(() => (tasks ? buildGraph(tasks) : null), [tasks]);

  const switchFormat = (next: "yaml" | "json") => {
    if (next === format || !read.doc) return setFormat(next);
    setText(next === "json" ? JSON.stringify(read.doc, null, 2) : stringify(read.doc));
    setFormat(next);
  };
  const save = async () => {
    if (!read.doc) return;
    setBusy(true);
    setError(null);
    try {
      const saved =
        code === null
          ? await call(
              api.POST("/api/v1/workflows", { params: { query: { release: false } }, body: read.doc }),
            )
          : await call(
              api.PUT("/api/v1/workflows/{code}", {
                params: { path: { code: String(code) } },
                body: read.doc,
              }),
            );
      void client.invalidateQueries({ queryKey: ["workflow", saved.code] });
      void client.invalidateQueries({ queryKey: ["workflows"] });
      navigate(`/workflows/${saved.code}`);
    } catch (exc) {
      setError(exc);
    } finally {
      setBusy(false);
    }
  };

  if (code !== null && existing.isPending) return <Loading what={`workflow ${code}`} />;
  if (code !== null && !existing.data)
    return <ErrorBox error={existing.error} title="Cannot load the workflow" />;
  return (
    <section>
      <div className="pagehead">
        <h1>{code === null ? "New workflow" : `Edit ${existing.data?.name ?? ""}`}</h1>
        <div className="actions">
          <div role="group" aria-label="Text format">
            <button aria-pressed={format === "yaml"} onClick={() => switchFormat("yaml")}>
              YAML
            </button>
            <button aria-pressed={format === "json"} onClick={() => switchFormat("json")}>
              JSON
            </button>
          </div>
          <button disabled={busy || !read.doc} onClick={() => void save()}>
            Save as new version
          </button>
        </div>
      </div>
      <ErrorBox error={error} title="Not saved" />
      {read.problem && <div className="error">Not a workflow document yet: {read.problem}</div>}
      <div className="editor">
        <textarea
          aria-label="Workflow document"
          spellCheck={false}
          value={text ?? ""}
          onChange={(e) => setText(e.target.value)}
          data-testid="editor-text"
        />
        <div>
          {graph && graph.dangling.length > 0 && (
            <div className="error">Upstream tasks that do not exist: {graph.dangling.join(", ")}</div>
          )}
          {graph && tasks && <DagView layoutKey={shapeKey(tasks)} graph={graph} />}
        </div>
      </div>
    </section>
  );
}
