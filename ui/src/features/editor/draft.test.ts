import { describe, expect, it } from "vitest";

import {
  addTask,
  connect,
  disconnect,
  errorTarget,
  freshName,
  removeTasks,
  updateTask,
  type Draft,
} from "./draft";
import { fieldsOf, fromText, toText } from "./schemaFields";

const base: Draft = {
  name: "w",
  project: "p",
  tasks: [
    { name: "a", type: "SHELL" },
    { name: "b", type: "SHELL", upstream: ["a"] },
    { name: "c", type: "SHELL", upstream: "b" },
  ],
};

describe("draft edits", () => {
  it("adds a task under a fresh name and keeps the other task objects", () => {
    const name = freshName(base, "SHELL");
    expect(name).toBe("shell_1");
    const next = addTask(base, { name, type: "SHELL" });
    expect(next.tasks.map((t) => t.name)).toEqual(["a", "b", "c", "shell_1"]);
    expect(next.tasks[0]).toBe(base.tasks[0]);
    expect(freshName(next, "SHELL")).toBe("shell_2");
  });

  it("connects, refusing duplicates, self links and cycles with a reason", () => {
    const linked = connect(base, "a", "c");
    expect(linked.refused).toBeUndefined();
    expect(linked.draft.tasks[2]?.upstream).toEqual(["b", "a"]);
    expect(linked.draft.tasks[0]).toBe(base.tasks[0]);
    expect(connect(base, "a", "b").refused).toMatch(/already waits/);
    expect(connect(base, "c", "a").refused).toMatch(/cycle/);
    expect(connect(base, "a", "a").refused).toMatch(/cycle/);
    expect(connect(base, "a", "zz").refused).toBe("unknown task");
  });

  it("disconnects and removes tasks with every link to them", () => {
    expect(disconnect(base, "a", "b").tasks[1]?.upstream).toBeUndefined();
    const removed = removeTasks(base, new Set(["b"]));
    expect(removed.tasks.map((t) => t.name)).toEqual(["a", "c"]);
    expect(removed.tasks[1]?.upstream).toBeUndefined();
    expect(removed.tasks[0]).toBe(base.tasks[0]);
  });

  it("renames a task and the links that name it", () => {
    const next = updateTask(base, "b", { name: "bee", type: "SHELL", upstream: ["a"] });
    expect(next.tasks.map((t) => t.name)).toEqual(["a", "bee", "c"]);
    expect(next.tasks[2]?.upstream).toEqual(["bee"]);
  });

  it("points a server error at its task and field", () => {
    expect(errorTarget("tasks[2].params.rawScript")).toEqual({ task: 2, field: "params.rawScript" });
    expect(errorTarget("tasks[0]")).toEqual({ task: 0, field: "" });
    expect(errorTarget("params")).toEqual({ field: "params" });
    expect(errorTarget(undefined)).toBeNull();
  });
});

describe("schema fields", () => {
  const schema = {
    type: "object",
    required: ["sql"],
    properties: {
      sqlType: { enum: ["query", "non_query"], default: "query" },
      sql: { type: "string", contentMediaType: "text/x-sql", description: "the statement" },
      maxRows: { type: "integer", minimum: 0 },
      ratio: { type: "number" },
      flag: { type: "boolean" },
      method: { type: "string", examples: ["GET", "POST"] },
      conf: { type: "object" },
      body: { type: ["string", "object"] },
    },
  };

  it("draws one field per parameter, required first, with the kind its schema says", () => {
    const fields = fieldsOf(schema);
    expect(fields.map((f) => [f.name, f.kind])).toEqual([
      ["sql", "code"],
      ["sqlType", "choice"],
      ["maxRows", "integer"],
      ["ratio", "number"],
      ["flag", "boolean"],
      ["method", "text"],
      ["conf", "json"],
      ["body", "json"],
    ]);
    expect(fields[0]?.required).toBe(true);
    expect(fields[1]?.options).toEqual(["query", "non_query"]);
    expect(fields[5]?.options).toEqual(["GET", "POST"]);
  });

  it("reads and writes each kind's text", () => {
    const [sql, , rows, , , , conf] = fieldsOf(schema);
    if (!sql || !rows || !conf) throw new Error("fields");
    expect(fromText(rows, "12")).toEqual({ value: 12 });
    expect(fromText(rows, "1.5").problem).toMatch(/whole/);
    expect(fromText(rows, "")).toEqual({});
    expect(fromText(conf, '{"a": 1}')).toEqual({ value: { a: 1 } });
    expect(fromText(conf, "{").problem).toMatch(/not JSON/);
    expect(fromText(sql, "select 1")).toEqual({ value: "select 1" });
    expect(toText(conf, { a: 1 })).toBe('{\n  "a": 1\n}');
    expect(toText(rows, undefined)).toBe("");
  });
});
