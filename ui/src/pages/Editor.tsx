// Create or change a workflow: on the graph (add, link by dragging, move, delete; a side form per task built
// from its type's parameter schema) or as YAML / JSON text, switching between them. Save = a new version;
// the server checks the document and its refusal is shown on the task and at the field it names.
// Big graphs: find a task, lay out again, collapse a branch or a selection into one node.
// New workflow: /workflows/new.
import { useQueryClient } from "@tanstack/react-query";
import { useCallback, useEffect, useMemo, useRef, useState } from "react";
import { useNavigate, useParams } from "react-router";
import { parse, stringify } from "yaml";

import { api, ApiError, call, type WorkflowDoc } from "../api/client";
import { useMe, useTaskTypes, useWorkflow } from "../api/queries";
import { ErrorBox, Loading } from "../components/ErrorBox";
import {
  addTask,
  connect,
  disconnect,
  errorTarget,
  freshName,
  removeTasks,
  updateTask,
  type Draft,
} from "../features/editor/draft";
import { EditGraph, type PlaceHints } from "../features/editor/EditGraph";
import { projectToCreate, refusalFixed, type Refusal } from "../features/editor/refusal";
import { templateOf, type JsonSchema } from "../features/editor/schemaFields";
import { tEditor } from "../features/editor/strings";
import { TaskForm } from "../features/editor/TaskForm";
import { WorkflowForm } from "../features/editor/WorkflowForm";
import { buildGraph, type TaskSpec } from "../features/graph/buildGraph";
import { NO_GROUPS, type Groups } from "../features/graph/collapse";
import { DagView } from "../features/graph/DagView";
import { tTitle } from "../components/strings";
import { useTitle } from "../components/title";

const TEMPLATE: Draft = {
  name: "my_workflow",
  project: "default",
  tasks: [{ name: "hello", type: "SHELL", params: { rawScript: "echo hello" } }],
};

type Mode = "graph" | "yaml" | "json";

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
  const client = useQueryClient();
  const [draft, setDraft] = useState<Draft | null>(code === null ? TEMPLATE : null);
  const [mode, setMode] = useState<Mode>("graph");
  const [text, setText] = useState("");
  const [textProblem, setTextProblem] = useState<string>();
  const [selected, setSelected] = useState<string | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [refusal, setRefusal] = useState<Refusal | null>(null);
  const refusalRef = useRef(refusal);
  refusalRef.current = refusal;
  const [askProject, setAskProject] = useState<string>();
  const projects = useMe().data?.projects.map((p) => p.name);
  const [notice, setNotice] = useState<string>();
  const [busy, setBusy] = useState(false);
  const [groups, setGroups] = useState<Groups>(NO_GROUPS);
  const hints = useRef<PlaceHints>(new Map()).current;
  const kept = useRef(new Map<string, { x: number; y: number }>()).current;
  const draftRef = useRef(draft);
  draftRef.current = draft;

  useEffect(() => {
    if (draft === null && existing.data) setDraft(existing.data.document);
  }, [existing.data, draft]);

  const types = useMemo(
    () => new Map((taskTypes.data?.items ?? []).map((t) => [t.type, t.params as JsonSchema])),
    [taskTypes.data],
  );
  const typeNames = useMemo(() => [...types.keys()], [types]);
  const taskNames = useMemo(() => (draft ? draft.tasks.map((t) => t.name) : []), [draft]);
  const errors = useMemo(() => new Map(refusal?.task ? [[refusal.task, refusal.message]] : []), [refusal]);

  // every edit goes through here: the graph's callbacks read the latest draft from the ref, so they stay
  // the same functions across edits (the graph's memoised nodes are not re-rendered by a new callback)
  const edit = useCallback((fn: (d: Draft) => Draft) => {
    const current = draftRef.current;
    if (!current) return;
    const next = fn(current);
    draftRef.current = next;
    setDraft(next);
    setNotice(undefined);
    setAskProject(undefined);
    // the refused value changed: its message leaves the screen (the next save checks it again)
    const refused = refusalRef.current;
    if (refused && refusalFixed(current, next, refused)) {
      setRefusal(null);
      setError(null);
    }
  }, []);
  const onConnect = useCallback(
    (source: string, target: string) => {
      const current = draftRef.current;
      if (!current) return;
      const result = connect(current, source, target);
      if (result.refused) setNotice(`Not linked: ${result.refused}`);
      else edit(() => result.draft);
    },
    [edit],
  );
  const onDisconnect = useCallback(
    (links: { source: string; target: string }[]) =>
      edit((d) => links.reduce((acc, l) => disconnect(acc, l.source, l.target), d)),
    [edit],
  );
  const onRemove = useCallback(
    (names: string[]) => {
      edit((d) => removeTasks(d, new Set(names)));
      setSelected((s) => (s && names.includes(s) ? null : s));
    },
    [edit],
  );
  const onAdd = useCallback(
    (type: string): string => {
      const current = draftRef.current as Draft;
      const name = freshName(current, type);
      edit((d) => addTask(d, { name, type, params: templateOf(types.get(type)) }));
      setSelected(name);
      return name;
    },
    [edit, types],
  );
  const onSelect = useCallback((name: string | null) => setSelected(name), []);

  const switchMode = (next: Mode) => {
    if (next === mode) return;
    let doc = draft;
    if (mode !== "graph") {
      const read = readDocument(text, mode);
      if (!read.doc) return setTextProblem(read.problem);
      doc = read.doc;
      setDraft(doc);
    }
    if (next !== "graph" && doc) setText(toText(doc, next));
    setTextProblem(undefined);
    setMode(next);
  };

  /** Save; a project the caller sees none of is created only once confirmed (``confirmed`` names it). */
  const save = async (confirmed?: string) => {
    let doc = draft;
    if (mode !== "graph") {
      const read = readDocument(text, mode);
      if (!read.doc) return setTextProblem(read.problem);
      doc = read.doc;
      setDraft(doc);
    }
    if (!doc) return;
    const creating = projectToCreate(projects, doc.project);
    if (creating !== undefined && creating !== confirmed) {
      setAskProject(creating);
      return;
    }
    setAskProject(undefined);
    setBusy(true);
    setError(null);
    setRefusal(null);
    try {
      const saved =
        code === null
          ? await call(api.POST("/api/v1/workflows", { params: { query: { release: false } }, body: doc }))
          : await call(
              api.PUT("/api/v1/workflows/{code}", { params: { path: { code: String(code) } }, body: doc }),
            );
      void client.invalidateQueries({ queryKey: ["workflow", saved.code] });
      void client.invalidateQueries({ queryKey: ["workflows"] });
      void client.invalidateQueries({ queryKey: ["me"] }); // a project it created
      navigate(`/workflows/${saved.code}`);
    } catch (exc) {
      setError(exc);
      const placed = placeRefusal(exc, doc);
      setRefusal(placed);
      if (placed?.task) {
        setSelected(placed.task);
        if (mode !== "graph") setMode("graph");
      } else if (placed) setSelected(null);
    } finally {
      setBusy(false);
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
              setAskProject(undefined);
              setSelected(null);
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
            onGroups={setGroups}
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
              onChange={(next) => edit((d) => updateTask(d, task.name, next))}
              onRename={(name) => {
                if (!name) return "a task needs a name";
                if (draft.tasks.some((t) => t.name === name)) return `there is already a task ${name}`;
                hints.set(name, task.name);
                edit((d) => updateTask(d, task.name, { ...task, name }));
                setSelected(name);
                return undefined;
              }}
              onRemove={() => onRemove([task.name])}
              onUnlink={(up) => onDisconnect([{ source: up, target: task.name }])}
              others={taskNames}
              onLink={(up) => onConnect(up, task.name)}
            />
          ) : (
            <WorkflowForm
              draft={draft}
              error={refusal && !refusal.task ? refusal : null}
              onChange={(next) => edit(() => next)}
            />
          )}
        </div>
      ) : (
        <TextView text={text} format={mode} onChange={setText} />
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
