// The task form in both languages: English by default (the document's keys as labels), Simplified Chinese in
// DolphinScheduler's words once switched, with nothing of the form left in English but the document's keys of
// the type's own parameters and the task type's name.
import { QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { cleanup, render, screen } from "@testing-library/react";
import { afterEach, beforeAll, describe, expect, it } from "vitest";

import { loadLocale } from "../../i18n/catalog";
import { keys } from "../../api/queries";
import { setLocale } from "../../i18n";
import type { DraftTask } from "./draft";
import type { JsonSchema } from "./schemaFields";
import { TaskForm } from "./TaskForm";
import { WorkflowForm } from "./WorkflowForm";

// the Chinese dictionaries, loaded as the header's switch loads them
beforeAll(() => loadLocale("zh-CN"));

const SHELL: JsonSchema = {
  properties: { rawScript: { type: "string", contentMediaType: "text/x-shellscript" } },
  required: ["rawScript"],
};
const TASK: DraftTask = {
  name: "load",
  type: "SHELL",
  params: { rawScript: "echo hi" },
  upstream: ["extract"],
};

function show() {
  render(
    <QueryClientProvider client={new QueryClient()}>
      <TaskForm
        task={TASK}
        types={new Map([["SHELL", SHELL]])}
        error={null}
        onChange={() => {}}
        onRename={() => undefined}
        onRemove={() => {}}
        onUnlink={() => {}}
        others={["extract", "report"]}
        onLink={() => {}}
      />
    </QueryClientProvider>,
  );
}

/** The workflow's form for a draft in a project the caller cannot see (its hint shown), one global parameter. */
function showWorkflow() {
  const client = new QueryClient();
  client.setQueryData(keys.me, { name: "ann", projects: [{ name: "etl" }] });
  render(
    <QueryClientProvider client={client}>
      <WorkflowForm
        draft={{ name: "daily", project: "elt", tasks: [], params: [{ prop: "day", value: "1" }] }}
        error={null}
        onChange={() => {}}
      />
    </QueryClientProvider>,
  );
}

/** What a reader sees or hears of a form's own texts: headings, labels, buttons, hints and aria-labels. */
function texts(testId: string): string[] {
  const form = screen.getByTestId(testId);
  const out: string[] = [];
  for (const el of form.querySelectorAll("h2, label, legend, summary, button, p, .hint, .label, .muted")) {
    const own = [...el.childNodes]
      .filter((n) => n.nodeType === Node.TEXT_NODE)
      .map((n) => n.textContent ?? "")
      .join("")
      .trim();
    if (own) out.push(own);
  }
  for (const el of form.querySelectorAll("[aria-label], [placeholder]"))
    for (const name of ["aria-label", "placeholder"]) {
      const value = el.getAttribute(name);
      if (value) out.push(value);
    }
  return out;
}

afterEach(() => {
  cleanup();
  setLocale("en");
});

describe("the editor's forms in both languages", () => {
  it("speaks English by default, the scheduling fields labelled by the document's keys", () => {
    show();
    expect(screen.getByRole("heading", { name: "Task" })).toBeTruthy();
    expect(screen.getByLabelText("retries")).toBeTruthy();
    expect(screen.getByText("waits for")).toBeTruthy();
    expect(screen.getByRole("button", { name: "Delete task" })).toBeTruthy();
  });

  it("speaks Chinese in DolphinScheduler's words once switched, no English left", () => {
    setLocale("zh-CN");
    show();
    expect(screen.getByLabelText("失败重试次数")).toBeTruthy();
    expect(screen.getByLabelText("延时执行时间（分）")).toBeTruthy();
    expect(screen.getByText("前置任务")).toBeTruthy();
    expect(screen.getByRole("button", { name: "删除任务" })).toBeTruthy();
    // the type's parameter keys stay as they are, and "default" is a value (worker_group's placeholder)
    const english = texts("task-form").filter(
      (text) => !/\p{Script=Han}/u.test(text) && !["rawScript", "*", "✕", "default"].includes(text),
    );
    expect(english).toEqual([]);
  });

  it("says the workflow's form in Chinese too", () => {
    setLocale("zh-CN");
    showWorkflow();
    expect(screen.getByRole("heading", { name: "工作流定义" })).toBeTruthy();
    expect(screen.getByTestId("new-project-hint").textContent).toContain("没有你可见的项目“elt”");
    expect(screen.getByLabelText("参数 1 名称")).toBeTruthy();
    expect(texts("workflow-form").filter((text) => !/\p{Script=Han}/u.test(text) && text !== "✕")).toEqual(
      [],
    );
  });
});
