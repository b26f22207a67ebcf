import { describe, expect, it } from "vitest";

import type { InstanceDetail, InstancePage, TaskInstance } from "../../api/client";
import { patchInstanceDetail, patchInstancePage } from "./patch";

const instance = (id: number, state = "RUNNING_EXECUTION") =>
  ({
    id,
    name: `wf-${id}`,
    workflow_code: 1,
    workflow_version: 1,
    project_code: 1,
    state,
    finished: false,
    host: null,
    start_time: null,
    end_time: null,
    duration_ms: null,
  }) as InstancePage["items"][number];

const task = (id: number, name: string, state = "RUNNING_EXECUTION"): TaskInstance => ({
  id,
  name,
  type: "SHELL",
  task_code: id,
  workflow_instance_id: 7,
  state,
  finished: false,
  attempt: 1,
  current: true,
});

describe("patchInstancePage", () => {
  const page: InstancePage = { items: [instance(1), instance(2)], total: 2, page: 1, size: 50 };

  it("replaces the state of a listed instance and marks it finished", () => {
    const { page: out, missing } = patchInstancePage(page, [{ kind: "instance", id: 2, state: "SUCCESS" }]);
    expect(out.items[1]).toMatchObject({ id: 2, state: "SUCCESS", finished: true });
    expect(out.items[0]).toBe(page.items[0]);
    expect(missing).toEqual([]);
  });

  it("reports instances it does not hold and leaves the page as is", () => {
    const { page: out, missing } = patchInstancePage(page, [
      { kind: "instance", id: 3, state: "SUBMITTED_SUCCESS" },
    ]);
    expect(out).toBe(page);
    expect(missing).toEqual([3]);
  });

  it("ignores task changes", () => {
    expect(patchInstancePage(page, [{ kind: "task", id: 1, instance: 1, state: "SUCCESS" }]).page).toBe(page);
  });
});

describe("patchInstanceDetail", () => {
  const detail = {
    ...instance(7),
    tasks_total: 2,
    tasks: [task(10, "a"), task(11, "b", "SUBMITTED_SUCCESS")],
  } as InstanceDetail;

  it("applies its own task changes and counts task ids it does not know", () => {
    const { detail: out, unknownTasks } = patchInstanceDetail(detail, [
      { kind: "task", id: 10, instance: 7, state: "SUCCESS" },
      { kind: "task", id: 12, instance: 7, state: "SUBMITTED_SUCCESS" },
      { kind: "task", id: 11, instance: 8, state: "FAILURE" },
      { kind: "instance", id: 7, state: "FAILURE" },
    ]);
    expect(out.tasks[0]).toMatchObject({ state: "SUCCESS", finished: true });
    expect(out.tasks[1]).toBe(detail.tasks[1]);
    expect(out.state).toBe("FAILURE");
    expect(out.finished).toBe(true);
    expect(unknownTasks).toBe(1);
  });

  it("returns the same object when nothing concerns it", () => {
    expect(patchInstanceDetail(detail, [{ kind: "instance", id: 99, state: "SUCCESS" }]).detail).toBe(detail);
  });
});
