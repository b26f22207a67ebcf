import { describe, expect, it } from "vitest";

import type { Draft } from "./draft";
import { projectToCreate, refusalFixed } from "./refusal";

const DRAFT: Draft = {
  name: "wf",
  project: "ux",
  tasks: [
    { name: "a", type: "SHELL", params: { rawScript: "" } },
    { name: "b", type: "SHELL", params: { rawScript: "echo b" }, upstream: ["a"] },
  ],
};

describe("refusalFixed", () => {
  it("is true once the refused field of the refused task changed, not for other edits", () => {
    const refusal = { task: "a", field: "params.rawScript", message: "must not be empty" };
    const moved: Draft = { ...DRAFT, description: "x" };
    expect(refusalFixed(DRAFT, moved, refusal)).toBe(false);
    const other: Draft = {
      ...DRAFT,
      tasks: [DRAFT.tasks[0]!, { ...DRAFT.tasks[1]!, params: { rawScript: "b" } }],
    };
    expect(refusalFixed(DRAFT, other, refusal)).toBe(false);
    const fixed: Draft = {
      ...DRAFT,
      tasks: [{ ...DRAFT.tasks[0]!, params: { rawScript: "echo a" } }, DRAFT.tasks[1]!],
    };
    expect(refusalFixed(DRAFT, fixed, refusal)).toBe(true);
    expect(refusalFixed(DRAFT, { ...DRAFT, tasks: [DRAFT.tasks[1]!] }, refusal)).toBe(true);
  });

  it("follows a workflow field and a list index", () => {
    expect(refusalFixed(DRAFT, { ...DRAFT, name: "wf2" }, { field: "name", message: "taken" })).toBe(true);
    const up = { task: "b", field: "upstream[0]", message: "no such task" };
    expect(refusalFixed(DRAFT, { ...DRAFT, name: "wf2" }, up)).toBe(false);
  });
});

describe("projectToCreate", () => {
  it("names a project the caller does not see, once their projects are known", () => {
    expect(projectToCreate(["ux", "etl"], "uxx")).toBe("uxx");
    expect(projectToCreate(["ux", "etl"], " ux ")).toBeUndefined();
    expect(projectToCreate(undefined, "uxx")).toBeUndefined();
    expect(projectToCreate(["ux"], "")).toBeUndefined();
  });
});
