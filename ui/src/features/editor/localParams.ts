// Pure: a task's localParams rows (DolphinScheduler's Property: prop / direct / type / value), the types the
// engine binds (engine/tasks/sql_runner.py typed(), engine/params.py), and the checks a row gets before a save.
import { tEditor } from "./strings";

export interface ParamRow {
  prop: string;
  direct: "IN" | "OUT";
  type: string;
  value: string;
}

export const DIRECTIONS = ["IN", "OUT"] as const;
/** DolphinScheduler's DataType, less FILE (the engine has no file parameters). */
export const PARAM_TYPES = [
  "VARCHAR",
  "INTEGER",
  "LONG",
  "FLOAT",
  "DOUBLE",
  "DATE",
  "TIME",
  "TIMESTAMP",
  "BOOLEAN",
  "LIST",
] as const;

/** The rows of a task's ``localParams`` (whatever the document held: missing fields get their defaults). */
export function rowsOf(value: unknown): ParamRow[] {
  if (!Array.isArray(value)) return [];
  return value.map((item) => {
    const p = (item && typeof item === "object" ? item : {}) as Record<string, unknown>;
    const direct = String(p.direct ?? "IN").toUpperCase() === "OUT" ? "OUT" : "IN";
    return {
      prop: String(p.prop ?? ""),
      direct,
      type: String(p.type ?? "VARCHAR").toUpperCase(),
      value: p.value === undefined || p.value === null ? "" : String(p.value),
    };
  });
}

const PLACEHOLDER = /\$\{[^}]*\}|\$\[[^\]]*\]/;
const DATE = /^\d{4}-\d{2}-\d{2}$/;
const TIME = /^\d{2}:\d{2}(:\d{2}(\.\d+)?)?$/;
const TIMESTAMP = /^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?$/;

/** Why ``value`` cannot be a ``type`` (undefined: it can). A value holding a placeholder is checked when the
 * task runs, as is an empty one (a value set by a start parameter or upstream). */
export function valueProblem(type: string, value: string): string | undefined {
  const v = value.trim();
  if (v === "" || PLACEHOLDER.test(v)) return undefined;
  const bad = (why: string) => tEditor.paramBadValue(type, why);
  switch (type) {
    case "INTEGER":
    case "LONG":
      return /^[-+]?\d+$/.test(v) ? undefined : bad(tEditor.paramWhyInteger);
    case "FLOAT":
    case "DOUBLE":
      return Number.isFinite(Number(v)) ? undefined : bad(tEditor.paramWhyNumber);
    case "BOOLEAN":
      return ["true", "false", "1", "0"].includes(v.toLowerCase()) ? undefined : bad(tEditor.paramWhyBoolean);
    case "DATE":
      return DATE.test(v) ? undefined : bad(tEditor.paramWhyDate);
    case "TIME":
      return TIME.test(v) ? undefined : bad(tEditor.paramWhyTime);
    case "TIMESTAMP":
      return TIMESTAMP.test(v) ? undefined : bad(tEditor.paramWhyTimestamp);
    case "LIST":
      try {
        return Array.isArray(JSON.parse(v)) ? undefined : bad(tEditor.paramWhyList);
      } catch {
        return bad(tEditor.paramWhyList);
      }
    default:
      return undefined;
  }
}

/** Row index -> what is wrong with it: no name, a name declared twice, a value its type cannot hold. */
export function rowProblems(rows: readonly ParamRow[]): Map<number, string> {
  const out = new Map<number, string>();
  const seen = new Map<string, number>();
  rows.forEach((row, i) => {
    const prop = row.prop.trim();
    if (!prop) out.set(i, tEditor.paramNeedsName);
    else if (seen.has(prop)) out.set(i, tEditor.paramDuplicate(prop));
    else {
      const problem = row.direct === "IN" ? valueProblem(row.type, row.value) : undefined;
      if (problem) out.set(i, problem);
    }
    if (prop && !seen.has(prop)) seen.set(prop, i);
  });
  return out;
}

/** The row the server's refusal of ``localParams`` names (its message says ``parameter 'x'``), else -1. */
export function rowOfRefusal(rows: readonly ParamRow[], message: string): number {
  const named = /parameter '([^']+)'/.exec(message)?.[1];
  return named === undefined ? -1 : rows.findIndex((r) => r.prop.trim() === named);
}

/** The problems of a task's ``localParams`` (for the save: a task with any is not sent). */
export function localParamsProblems(params: Record<string, unknown> | undefined): number {
  return rowProblems(rowsOf(params?.localParams)).size;
}
