// Pure: the editor's state and its transitions, one reducer (the page dispatches typed actions; the graph's
// callbacks stay the same functions since dispatch never changes). ``dirty``: the document differs from the
// one loaded or saved last (what a leave prompt asks about).
import { NO_GROUPS, type Groups } from "../graph/collapse";
import {
  addTask,
  connect,
  disconnect,
  freshName,
  removeTasks,
  updateTask,
  type Draft,
  type DraftTask,
} from "./draft";
import { refusalFixed, type Refusal } from "./refusal";

export type Mode = "graph" | "yaml" | "json";

export interface EditorState {
  draft: Draft | null;
  dirty: boolean;
  mode: Mode;
  /** the document as text in the YAML / JSON view */
  text: string;
  textProblem?: string;
  selected: string | null;
  /** a link the graph refused, and why */
  notice?: string;
  /** a project the save would create: asked first */
  askProject?: string;
  /** the last save's failure, and where its refusal points */
  error: unknown;
  refusal: Refusal | null;
  groups: Groups;
}

export type EditorAction =
  /** the document as loaded (or the new workflow's template): not dirty */
  | { type: "load"; draft: Draft }
  | { type: "add"; task: DraftTask }
  | { type: "remove"; names: readonly string[] }
  | { type: "connect"; source: string; target: string }
  | { type: "disconnect"; links: readonly { source: string; target: string }[] }
  /** a task's fields (a rename renames the links to it and keeps it selected) */
  | { type: "update"; name: string; task: DraftTask }
  /** the workflow's own fields */
  | { type: "replace"; draft: Draft }
  | { type: "select"; name: string | null }
  /** a save refused before it was sent: ``name`` (the task to fix) selected, ``notice`` says why */
  | { type: "hold-save"; name: string; notice: string }
  | { type: "groups"; groups: Groups }
  /** the view switched; ``draft``: the document read from the text view, ``text``: the new view's text */
  | { type: "mode"; mode: Mode; draft?: Draft; text?: string }
  | { type: "text"; text: string }
  | { type: "text-problem"; problem: string }
  /** a save starts with ``draft`` (read from the text view, or the graph's) */
  | { type: "saving"; draft: Draft }
  /** ``draft``: the document read from the text view before asking */
  | { type: "ask-project"; project: string | undefined; draft?: Draft }
  | { type: "saved" }
  | { type: "save-failed"; error: unknown; refusal: Refusal | null };

export function initialEditorState(draft: Draft | null): EditorState {
  return {
    draft,
    dirty: false,
    mode: "graph",
    text: "",
    selected: null,
    error: null,
    refusal: null,
    groups: NO_GROUPS,
  };
}

/** A change of the document: clears the graph's notice and a pending project question; a refusal whose
 * refused value changed leaves (the next save checks it again). */
function edited(state: EditorState, next: Draft): EditorState {
  const current = state.draft as Draft;
  const out: EditorState = {
    ...state,
    draft: next,
    dirty: state.dirty || next !== current,
    notice: undefined,
    askProject: undefined,
  };
  if (state.refusal && refusalFixed(current, next, state.refusal)) {
    out.refusal = null;
    out.error = null;
  }
  return out;
}

export function editorReducer(state: EditorState, action: EditorAction): EditorState {
  switch (action.type) {
    case "load":
      return { ...state, draft: action.draft, dirty: false };
    case "select":
      return { ...state, selected: action.name };
    case "hold-save":
      return { ...state, selected: action.name, notice: action.notice };
    case "groups":
      return { ...state, groups: action.groups };
    case "text":
      return { ...state, text: action.text, dirty: state.dirty || action.text !== state.text };
    case "text-problem":
      return { ...state, textProblem: action.problem };
    // the text view's document replaces the graph's: typing the text already made it dirty
    case "mode": {
      const draft = action.draft ?? state.draft;
      return { ...state, draft, text: action.text ?? state.text, textProblem: undefined, mode: action.mode };
    }
    case "saving":
      return { ...state, draft: action.draft, askProject: undefined, error: null, refusal: null };
    case "ask-project":
      return { ...state, askProject: action.project, draft: action.draft ?? state.draft };
    case "saved":
      return { ...state, dirty: false };
    case "save-failed": {
      const { error, refusal } = action;
      if (refusal?.task) return { ...state, error, refusal, selected: refusal.task, mode: "graph" };
      if (refusal) return { ...state, error, refusal, selected: null };
      return { ...state, error, refusal };
    }
  }
  const state0 = state.draft;
  if (!state0) return state;
  switch (action.type) {
    case "add": {
      // a name taken meanwhile (two adds before a render): the next fresh one
      const taken = state0.tasks.some((t) => t.name === action.task.name);
      const task = taken ? { ...action.task, name: freshName(state0, action.task.type) } : action.task;
      return { ...edited(state, addTask(state0, task)), selected: task.name };
    }
    case "remove": {
      const names = new Set(action.names);
      const next = edited(state, removeTasks(state0, names));
      return state.selected !== null && names.has(state.selected) ? { ...next, selected: null } : next;
    }
    case "connect": {
      const result = connect(state0, action.source, action.target);
      if (result.refused) return { ...state, notice: `Not linked: ${result.refused}` };
      return edited(state, result.draft);
    }
    case "disconnect":
      return edited(
        state,
        action.links.reduce((acc, l) => disconnect(acc, l.source, l.target), state0),
      );
    case "update": {
      const next = edited(state, updateTask(state0, action.name, action.task));
      const renamed = action.task.name !== action.name && state.selected === action.name;
      return renamed ? { ...next, selected: action.task.name } : next;
    }
    case "replace":
      return edited(state, action.draft);
  }
}
