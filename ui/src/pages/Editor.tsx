// Create or change a workflow: on the graph (add, link by dragging, move, delete; a side form per task built
// from its type's parameter schema) or as YAML / JSON text, switching between them. Save = a new version;
// the server checks the document and its refusal is shown on the task and at the field it names.
// Big graphs: find a task, lay out again, collapse a branch or a selection into one node.
// New workflow: /workflows/new.
import { useCallback, useEffect, useMemo, useReducer, useRef } from "react";
import { useNavigate, useParams } from "react-router";
import { parse, stringify } from "yaml";

import { ApiError, type WorkflowDoc } from "../api/client";
import { useMe, useSaveWorkflow, useTaskTypes, useWorkflow } from "../api/queries";
import { ErrorBox, Loading } from "../components/ErrorBox";
import { errorTarget, freshName, type Draft } from "../features/editor/draft";
import { EditGraph, type PlaceHints } from "../features/editor/EditGraph";
import { editorReducer, initialEditorState, type Mode } from "../features/editor/editorState";
import { localParamsProblems } from "../features/editor/localParams";
import { projectToCreate, type Refusal } from "../features/editor/refusal";
import { templateOf, type JsonSchema } from "../features/editor/schemaFields";
import { tEditor } from "../features/editor/strings";
import { TaskForm } from "../features/editor/TaskForm";
import { WorkflowForm } from "../features/editor/WorkflowForm";
import { buildGraph, type TaskSpec } from "../features/graph/buildGraph";
import type { Groups } from "../features/graph/collapse";
import { DagView } from "../features/graph/DagView";
import { tTitle } from "../components/strings";
import { useTitle } from "../components/title";

const TEMPLATE: Draft = {
  name: "my_workflow",
  project: "default",
  tasks: [{ name: "hello", type: "SHELL", params: { rawScript: "echo hello" } }],
};

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

function toText(doc: Draft, format: "yaml" | "json"): string {
  return format === "json" ? JSON.stringify(doc, null, 2) : stringify(doc);
}

/** A layout key from the graph's shape: the same tasks and links reuse the cached layout. */
function shapeKey(tasks: readonly TaskSpec[]): string {
  let h = 0;
  const text = JSON.stringify(tasks.map((t) => [t.name, t.type, t.upstream ?? null]));
  for (let i = 0; i < text.length; i += 1) h = (h * 31 + text.charCodeAt(i)) | 0;
  return `draft:${h}:${text.length}`;
}

function placeRefusal(exc: unknown, sent: Draft): Refusal | null {
  if (!(exc instanceof ApiError) || exc.status !== 400) return null;
  const target = errorTarget(exc.field);
  if (!target) return null;
  const task = target.task === undefined ? undefined : sent.tasks[target.task]?.name;
  return { task, field: target.field, message: exc.message };
}

export function Editor() {
  const param = useParams().code;
  const code = param === undefined ? null : Number(param);
  const existing = useWorkflow(code);
  useTitle(code === null ? tTitle.newWorkflow : tTitle.editWorkflow(code), existing.data?.name);
  const taskTypes = useTaskTypes();
  const navigate = useNavigate();
  const saving = useSaveWorkflow(code);
  const [state, dispatch] = useReducer(editorReducer, code === null ? TEMPLATE : null, initialEditorState);
  const { draft, mode, text, textProblem, selected, error, refusal, askProject, notice, groups } = state;
  const projects = useMe().data?.projects.map((p) => p.name);
  const busy = saving.isPending;
  const hints = useRef<PlaceHints>(new Map()).current;
  const kept = useRef(new Map<string, { x: number; y: number }>()).current;
  const draftRef = useRef(draft);
  draftRef.current = draft;

  useEffect(() => {
    if (draft === null && existing.data) dispatch({ type: "load", draft: existing.data.document });
  }, [existing.data, draft]);

  const types = useMemo(
    () => new Map((taskTypes.data?.items ?? []).map((t) => [t.type, t.params as JsonSchema])),
    [taskTypes.data],
  );
  const typeNames = useMemo(() => [...types.keys()], [types]);
  const taskNames = useMemo(() => (draft ? draft.tasks.map((t) => t.name) : []), [draft]);
  const errors = useMemo(() => new Map(refusal?.task ? [[refusal.task, refusal.message]] : []), [refusal]);

  // every edit is an action of the reducer (editorState.ts): dispatch never changes, so the graph's callbacks
  // stay the same functions across edits (the graph's memoised nodes are not re-rendered by a new callback)
  const onConnect = useCallback(
    (source: string, target: string) => dispatch({ type: "connect", source, target }),
    [],
  );
  const onDisconnect = useCallback(
    (links: { source: string; target: string }[]) => dispatch({ type: "disconnect", links }),
    [],
  );
  const onRemove = useCallback((names: string[]) => dispatch({ type: "remove", names }), []);
  const onAdd = useCallback(
    (type: string): string => {
      const name = freshName(draftRef.current as Draft, type);
      dispatch({ type: "add", task: { name, type, params: templateOf(types.get(type)) } });
      return name;
    },
    [types],
  );
  const onSelect = useCallback((name: string | null) => dispatch({ type: "select", name }), []);
  const onGroups = useCallback((next: Groups) => dispatch({ type: "groups", groups: next }), []);

  const switchMode = (next: Mode) => {
    if (next === mode) return;
    let doc = draft;
    if (mode !== "graph") {
      const read = readDocument(text, mode);
      if (!read.doc) return dispatch({ type: "text-problem", problem: read.problem as string });
      doc = read.doc;
    }
    const nextText = next !== "graph" && doc ? toText(doc, next) : undefined;
    dispatch({ type: "mode", mode: next, draft: doc ?? undefined, text: nextText });
  };

  /** Save; a project the caller sees none of is created only once confirmed (``confirmed`` names it). */
  const save = async (confirmed?: string) => {
    let doc = draft;
    if (mode !== "graph") {
      const read = readDocument(text, mode);
      if (!read.doc) return dispatch({ type: "text-problem", problem: read.problem as string });
      doc = read.doc;
    }
    if (!doc) return;
    // a local parameter's problem is shown at its row: the save waits until it is fixed
    const unfixed = doc.tasks.find((t) => localParamsProblems(t.params as Record<string, unknown>) > 0);
    if (unfixed) {
      const notice = tEditor.paramsInvalid(localParamsProblems(unfixed.params as Record<string, unknown>));
      return dispatch({ type: "hold-save", name: unfixed.name, notice });
    }
    const creating = projectToCreate(projects, doc.project);
    if (creating !== undefined && creating !== confirmed) {
      dispatch({ type: "ask-project", project: creating, draft: doc });
      return;
    }
    dispatch({ type: "saving", draft: doc });
    try {
      const saved = await saving.mutateAsync(doc);
      dispatch({ type: "saved" });
      navigate(`/workflows/${saved.code}`);
    } catch (exc) {
      dispatch({ type: "save-failed", error: exc, refusal: placeRefusal(exc, doc) });
    }
  };

  if (code !== null && existing.isPending) return <Loading what={`workflow ${code}`} />;
  if (code !== null && !existing.data)
    return <ErrorBox error={existing.error} title="Cannot load the workflow" />;
  if (!draft) return <Loading what="the document" />;
  const task = selected ? draft.tasks.find((t) => t.name === selected) : undefined;
  // the saved version's layout (cached by version) while the graph is the saved one
  const layoutKey =
    code !== null && existing.data && draft === existing.data.document
      ? `${code}:${existing.data.version}`
      : shapeKey(draft.tasks);
  return (
    <section>
      <div className="pagehead">
        <h1>{code === null ? "New workflow" : `Edit ${existing.data?.name ?? ""}`}</h1>
        <div className="actions">
          <div role="group" aria-label="Editor view">
            {(["graph", "yaml", "json"] as const).map((m) => (
              <button key={m} aria-pressed={mode === m} onClick={() => switchMode(m)}>
                {m === "graph" ? "Graph" : m.toUpperCase()}
              </button>
            ))}
          </div>
          <button disabled={busy} onClick={() => void save()} data-save>
            Save as new version
          </button>
        </div>
      </div>
      <ErrorBox error={error} title="Not saved" />
      {askProject !== undefined && (
        <div className="notice" role="alert" data-testid="confirm-project">
          {tEditor.createProject(askProject)}{" "}
          <button onClick={() => void save(askProject)}>{tEditor.createAndSave(askProject)}</button>{" "}
          <button
            onClick={() => {
              dispatch({ type: "ask-project", project: undefined });
              dispatch({ type: "select", name: null });
              if (mode !== "graph") switchMode("graph");
              requestAnimationFrame(() => document.getElementById("wf-project")?.focus());
            }}
          >
            {tEditor.pickProject}
          </button>
        </div>
      )}
      <ErrorBox error={taskTypes.error} title="Cannot load the task types" />
      {notice && (
        <div className="error" role="status">
          {notice}
        </div>
      )}
      {textProblem && <div className="error">Not a workflow document yet: {textProblem}</div>}
      {mode === "graph" ? (
        <div className="graph-editor">
          <EditGraph
            tasks={draft.tasks}
            layoutKey={layoutKey}
            errors={errors}
            selected={selected}
            hints={hints}
            kept={kept}
            types={typeNames}
            groups={groups}
            onGroups={onGroups}
            onSelect={onSelect}
            onConnect={onConnect}
            onDisconnect={onDisconnect}
            onRemove={onRemove}
            onAdd={onAdd}
          />
          {task ? (
            <TaskForm
              key={task.name}
              task={task}
              types={types}
              error={refusal?.task === task.name ? refusal : null}
              onChange={(next) => dispatch({ type: "update", name: task.name, task: next })}
              onRename={(name) => {
                if (!name) return "a task needs a name";
                if (draft.tasks.some((t) => t.name === name)) return `there is already a task ${name}`;
                hints.set(name, task.name);
                dispatch({ type: "update", name: task.name, task: { ...task, name } });
                dispatch({ type: "select", name });
                return undefined;
              }}
              onRemove={() => onRemove([task.name])}
              onUnlink={(up) => onDisconnect([{ source: up, target: task.name }])}
              others={taskNames}
              onLink={(up) => onConnect(up, task.name)}
              tasks={draft.tasks}
              onLinkBelow={(down) => onConnect(task.name, down)}
            />
          ) : (
            <WorkflowForm
              draft={draft}
              error={refusal && !refusal.task ? refusal : null}
              onChange={(next) => dispatch({ type: "replace", draft: next })}
            />
          )}
        </div>
      ) : (
        <TextView text={text} format={mode} onChange={(next) => dispatch({ type: "text", text: next })} />
      )}
    </section>
  );
}

function TextView({
  text,
  format,
  onChange,
}: {
  text: string;
  format: "yaml" | "json";
  onChange: (text: string) => void;
}) {
  const read = useMemo(() => readDocument(text, format), [text, format]);
  const tasks = read.doc?.tasks as TaskSpec[] | undefined;
  const graph = useMemo(() => (tasks ? buildGraph(tasks) : null), [tasks]);
  return (
    <>
      {read.problem && <div className="error">Not a workflow document yet: {read.problem}</div>}
      <div className="editor">
        <textarea
          aria-label="Workflow document"
          spellCheck={false}
          value={text}
          onChange={(e) => onChange(e.target.value)}
          data-testid="editor-text"
        />
        <div>
          {graph && graph.dangling.length > 0 && (
            <div className="error">Upstream tasks that do not exist: {graph.dangling.join(", ")}</div>
          )}
          {graph && tasks && <DagView layoutKey={shapeKey(tasks)} graph={graph} />}
        </div>
      </div>
    </>
  );
}
