import { describe, expect, it } from "vitest";

import { PARAM_TYPES, rowOfRefusal, rowProblems, rowsOf, valueProblem, type ParamRow } from "./localParams";

const row = (prop: string, type = "VARCHAR", value = "", direct: "IN" | "OUT" = "IN"): ParamRow => ({
  prop,
  direct,
  type,
  value,
});

describe("localParams", () => {
  it("reads a document's entries, filling DolphinScheduler's defaults", () => {
    expect(rowsOf([{ prop: "a" }, { prop: "b", direct: "out", type: "integer", value: 3 }])).toEqual([
      row("a"),
      row("b", "INTEGER", "3", "OUT"),
    ]);
    expect(rowsOf(undefined)).toEqual([]);
  });

  it("offers the types the engine binds, without FILE", () => {
    expect(PARAM_TYPES).toContain("TIMESTAMP");
    expect(PARAM_TYPES).not.toContain("FILE");
  });

  it("checks a value against its type, leaving placeholders and empty values to the run", () => {
    expect(valueProblem("INTEGER", "12")).toBeUndefined();
    expect(valueProblem("INTEGER", "1.5")).toMatch(/not a INTEGER/);
    expect(valueProblem("DOUBLE", "abc")).toMatch(/a number/);
    expect(valueProblem("BOOLEAN", "yes")).toMatch(/true or false/);
    expect(valueProblem("DATE", "2026-01-02")).toBeUndefined();
    expect(valueProblem("DATE", "02/01/2026")).toMatch(/yyyy-MM-dd/);
    expect(valueProblem("TIMESTAMP", "2026-01-02 03:04:05")).toBeUndefined();
    expect(valueProblem("LIST", "[1, 2]")).toBeUndefined();
    expect(valueProblem("LIST", "1, 2")).toMatch(/JSON list/);
    expect(valueProblem("INTEGER", "${n}")).toBeUndefined();
    expect(valueProblem("DATE", "$[yyyy-MM-dd]")).toBeUndefined();
    expect(valueProblem("INTEGER", "")).toBeUndefined();
  });

  it("names the row without a name, the second of a duplicate, and a bad IN value", () => {
    const problems = rowProblems([
      row("a"),
      row(""),
      row("a"),
      row("n", "INTEGER", "x"),
      row("o", "INTEGER", "x", "OUT"),
    ]);
    expect([...problems.keys()]).toEqual([1, 2, 3]);
    expect(problems.get(2)).toMatch(/a is declared twice/);
  });

  it("places the server's refusal at the row it names", () => {
    const rows = [row("a"), row("b")];
    expect(rowOfRefusal(rows, "parameter 'b': direct must be IN or OUT, got 'X'")).toBe(1);
    expect(rowOfRefusal(rows, "a parameter needs a non-empty 'prop' name")).toBe(-1);
  });
});
