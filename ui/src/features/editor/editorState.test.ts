import { describe, expect, it } from "vitest";

import type { Draft } from "./draft";
import { editorReducer, initialEditorState, type EditorAction, type EditorState } from "./editorState";

const base: Draft = {
  name: "w",
  project: "p",
  tasks: [
    { name: "a", type: "SHELL" },
    { name: "b", type: "SHELL", upstream: ["a"] },
  ],
};

function run(state: EditorState, ...actions: EditorAction[]): EditorState {
  return actions.reduce(editorReducer, state);
}

const loaded = run(initialEditorState(null), { type: "load", draft: base });

describe("editor state", () => {
  it("holds a save on the task to fix, without touching the document", () => {
    const held = run(loaded, { type: "hold-save", name: "b", notice: "1 local parameter(s) to fix" });
    expect(held.selected).toBe("b");
    expect(held.notice).toBe("1 local parameter(s) to fix");
    expect(held.draft).toBe(loaded.draft);
    expect(held.dirty).toBe(false);
  });

  it("loads a document as it is, not dirty", () => {
    expect(loaded.draft).toBe(base);
    expect(loaded.dirty).toBe(false);
    expect(initialEditorState(base).dirty).toBe(false);
  });

  it("ignores document edits before a document is loaded", () => {
    const empty = initialEditorState(null);
    expect(run(empty, { type: "add", task: { name: "x", type: "SHELL" } })).toBe(empty);
    expect(run(empty, { type: "remove", names: ["a"] })).toBe(empty);
  });

  it("adds a task, selects it and is dirty", () => {
    const next = run(loaded, { type: "add", task: { name: "shell_1", type: "SHELL" } });
    expect(next.draft?.tasks.map((t) => t.name)).toEqual(["a", "b", "shell_1"]);
    expect(next.selected).toBe("shell_1");
    expect(next.dirty).toBe(true);
  });

  it("adds under the next fresh name when the name was taken meanwhile", () => {
    const task = { name: "shell_1", type: "SHELL" };
    const next = run(loaded, { type: "add", task }, { type: "add", task });
    expect(next.draft?.tasks.map((t) => t.name)).toEqual(["a", "b", "shell_1", "shell_2"]);
    expect(next.selected).toBe("shell_2");
  });

  it("removes tasks and their links, and deselects a removed task", () => {
    const next = run(loaded, { type: "select", name: "a" }, { type: "remove", names: ["a"] });
    expect(next.draft?.tasks).toEqual([{ name: "b", type: "SHELL" }]);
    expect(next.selected).toBeNull();
    expect(next.dirty).toBe(true);
    const kept = run(loaded, { type: "select", name: "b" }, { type: "remove", names: ["a"] });
    expect(kept.selected).toBe("b");
  });

  it("connects and disconnects", () => {
    const linked = run(loaded, { type: "connect", source: "b", target: "a" });
    expect(linked.notice).toBe("Not linked: b -> a would make a cycle");
    expect(linked.draft).toBe(base);
    expect(linked.dirty).toBe(false);
    const cut = run(loaded, { type: "disconnect", links: [{ source: "a", target: "b" }] });
    expect(cut.draft?.tasks[1]).toEqual({ name: "b", type: "SHELL" });
    expect(cut.dirty).toBe(true);
    const again = run(cut, { type: "connect", source: "a", target: "b" });
    expect(again.draft?.tasks[1]?.upstream).toEqual(["a"]);
  });

  it("an edit clears the graph's notice and the pending project question", () => {
    const asked = run(
      loaded,
      { type: "connect", source: "b", target: "a" },
      { type: "ask-project", project: "new" },
    );
    expect(asked.askProject).toBe("new");
    const next = run(asked, { type: "replace", draft: { ...base, name: "w2" } });
    expect(next.notice).toBeUndefined();
    expect(next.askProject).toBeUndefined();
  });

  it("edits a task's fields; a rename renames its links and keeps it selected", () => {
    const next = run(
      loaded,
      { type: "select", name: "a" },
      { type: "update", name: "a", task: { name: "first", type: "SHELL", params: { rawScript: "x" } } },
    );
    expect(next.draft?.tasks).toEqual([
      { name: "first", type: "SHELL", params: { rawScript: "x" } },
      { name: "b", type: "SHELL", upstream: ["first"] },
    ]);
    expect(next.selected).toBe("first");
    expect(next.dirty).toBe(true);
  });

  it("an edit that changes nothing leaves it clean", () => {
    const next = run(loaded, { type: "disconnect", links: [{ source: "b", target: "a" }] });
    expect(next.draft).toBe(base);
    expect(next.dirty).toBe(false);
  });

  it("a refusal leaves once its refused value changes, not on other edits", () => {
    const refused = run(
      loaded,
      { type: "saving", draft: base },
      {
        type: "save-failed",
        error: new Error("bad"),
        refusal: { task: "b", field: "params", message: "bad" },
      },
    );
    expect(refused.selected).toBe("b");
    expect(refused.refusal?.message).toBe("bad");
    const other = run(refused, { type: "update", name: "a", task: { name: "a", type: "HTTP" } });
    expect(other.refusal).not.toBeNull();
    const fixed = run(other, {
      type: "update",
      name: "b",
      task: { name: "b", type: "SHELL", upstream: ["a"], params: { x: 1 } },
    });
    expect(fixed.refusal).toBeNull();
    expect(fixed.error).toBeNull();
  });

  it("a refusal of the workflow deselects; one of a task returns to the graph", () => {
    const text = run(loaded, { type: "mode", mode: "yaml", text: "name: w" }, { type: "select", name: "a" });
    const workflow = run(text, {
      type: "save-failed",
      error: new Error("x"),
      refusal: { field: "name", message: "x" },
    });
    expect(workflow.selected).toBeNull();
    expect(workflow.mode).toBe("yaml");
    const task = run(text, {
      type: "save-failed",
      error: new Error("x"),
      refusal: { task: "b", field: "", message: "x" },
    });
    expect(task.mode).toBe("graph");
    expect(task.selected).toBe("b");
    const other = run(text, { type: "save-failed", error: new Error("down"), refusal: null });
    expect(other.selected).toBe("a");
    expect(other.error).toEqual(new Error("down"));
  });

  it("the text view: typing makes it dirty, switching views alone does not", () => {
    const viewed = run(loaded, { type: "mode", mode: "json", text: "{}" });
    expect(viewed.mode).toBe("json");
    expect(viewed.text).toBe("{}");
    const back = run(viewed, { type: "mode", mode: "graph", draft: { ...base } });
    expect(back.dirty).toBe(false);
    const typed = run(viewed, { type: "text", text: '{"name": "x"}' });
    expect(typed.dirty).toBe(true);
    const problem = run(typed, { type: "text-problem", problem: "no tasks" });
    expect(problem.textProblem).toBe("no tasks");
    expect(run(problem, { type: "mode", mode: "yaml", text: "" }).textProblem).toBeUndefined();
  });

  it("a save clears the last error; saved marks it clean; a failed save stays dirty", () => {
    const edited = run(loaded, { type: "replace", draft: { ...base, name: "w2" } });
    const saving = run(
      { ...edited, error: new Error("old"), askProject: "p2" },
      { type: "saving", draft: edited.draft as Draft },
    );
    expect(saving.error).toBeNull();
    expect(saving.askProject).toBeUndefined();
    expect(run(saving, { type: "saved" }).dirty).toBe(false);
    expect(run(saving, { type: "save-failed", error: new Error("x"), refusal: null }).dirty).toBe(true);
  });

  it("keeps the collapsed groups", () => {
    const groups = new Map();
    expect(run(loaded, { type: "groups", groups }).groups).toBe(groups);
  });
});
