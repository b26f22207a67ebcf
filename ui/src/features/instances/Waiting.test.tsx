import { act, cleanup, render, screen } from "@testing-library/react";
import { MemoryRouter } from "react-router";
import { afterEach, beforeEach, describe, expect, it } from "vitest";

import type { TaskWait, Waiting } from "../../api/client";
import { formatTime, setDisplayZone } from "../../components/time";
import { RunWaiting, waitText, WhyWaiting } from "./Waiting";

const base = { task_instance_id: 7, task_code: 70, task_name: "load" };
const at = "2026-11-27T04:30:00+00:00";

function shown(wait: TaskWait): string {
  render(<WhyWaiting wait={{ ...base, ...wait }} />);
  return screen.getByTestId("why-load").textContent ?? "";
}

beforeEach(() => act(() => setDisplayZone("UTC")));
afterEach(cleanup);

describe("WhyWaiting", () => {
  it("names the worker group without a live worker", () => {
    expect(shown({ ...base, kind: "no_worker", worker_group: "gpu" })).toBe("no live worker in group gpu");
  });

  it("says which workers are full and which overloaded, in their own words", () => {
    const text = shown({
      ...base,
      kind: "workers_busy",
      worker_group: "default",
      workers: [
        { address: "w1:1234", state: "full", running: 4, slots: 4 },
        { address: "w2:1234", state: "overloaded", detail: "load average 9.1 over 8" },
      ],
    });
    expect(text).toBe(
      "every worker of group default is busy: w1:1234 full (4 of 4 slots); w2:1234 overloaded (load average 9.1 over 8)",
    );
  });

  it("gives the place in the task group's queue", () => {
    const wait: TaskWait = {
      ...base,
      kind: "task_group",
      task_group: "db",
      position: 1,
      queued: 1,
      used: 1,
      size: 1,
    };
    expect(shown(wait)).toBe("task group db: position 1 of 1 in its queue, 1 of 1 slots used");
  });

  it("gives a retry's number and due time in the display zone", () => {
    const utc = formatTime(at, "UTC");
    expect(utc).toMatch(/04:30:00 UTC$/);
    expect(shown({ ...base, kind: "retry", retry: 1, retries: 3, at })).toBe(`retry 1 of 3, due at ${utc}`);
    cleanup();
    act(() => setDisplayZone("Asia/Shanghai"));
    const shanghai = formatTime(at, "Asia/Shanghai");
    expect(shanghai).toMatch(/12:30:00 UTC\+8$/);
    expect(shown({ ...base, kind: "delay", at })).toBe(`delayed: starts at ${shanghai}`);
    expect(screen.getByTestId("why-load").querySelector("time")?.getAttribute("dateTime")).toBe(at);
  });

  it("has the same words for a tooltip", () => {
    expect(waitText({ ...base, kind: "delay", at }, "UTC")).toBe(
      `delayed: starts at ${formatTime(at, "UTC")}`,
    );
    expect(waitText({ ...base, kind: "dispatched", host: "w1:1" }, "UTC")).toBe(
      "sent to w1:1, not started yet",
    );
  });
});

describe("RunWaiting", () => {
  const answer: Waiting = {
    id: 12,
    state: "RUNNING_EXECUTION",
    host: "m1:5678",
    unknown: "reason unknown: master m1:5678 did not answer",
    unknown_kind: "silent",
    serial_wait: null,
    tasks: [],
  };

  it("says when the master did not answer", () => {
    render(<RunWaiting answer={answer} />);
    expect(screen.getByTestId("why-unknown").textContent).toBe(
      "reason unknown: master m1:5678 did not answer",
    );
  });

  it("names the run a serial wait waits behind, linked", () => {
    render(
      <MemoryRouter>
        <RunWaiting
          answer={{
            ...answer,
            state: "SERIAL_WAIT",
            unknown: null,
            unknown_kind: null,
            serial_wait: {
              reason: "nightly runs 1 of at most 1 (instances 11): waiting for one to end",
              behind: [{ id: 11, name: "nightly-11", state: "RUNNING_EXECUTION" }],
              position: 1,
              waiting: 2,
            },
          }}
        />
      </MemoryRouter>,
    );
    const box = screen.getByTestId("why-serial");
    expect(box.textContent).toContain(
      "This run waits for its turn (serial execution) behind #11 nightly-11 (RUNNING_EXECUTION); position 1 of 2 waiting runs",
    );
    expect(screen.getByRole("link").getAttribute("href")).toBe("/instances/11");
    expect(screen.queryByTestId("why-unknown")).toBeNull();
  });
});
