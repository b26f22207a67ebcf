// The start dialog's pure part: the workflow's declared global parameters as rows, and the body of
// POST /workflows/{code}/start (engine/api/workflow_start.py _START) with the rows' errors at their fields.
import { tStart, type FailureStrategy, type Priority, type Scope, type WarningType } from "./strings";

/** A parameter row: a declared one (its name fixed, its value pre-filled) or one the user added. */
export interface ParamRow {
  prop: string;
  value: string;
  /** the workflow's own value; undefined for an added row */
  declared?: string;
}

export interface StartForm {
  rows: ParamRow[];
  failureStrategy: FailureStrategy;
  workerGroup: string;
  warningType: WarningType;
  /** an alert group's id, or "" for none */
  alertGroup: string;
  priority: Priority;
  dryRun: boolean;
  startTasks: string[];
  scope: Scope;
}

export interface StartBody {
  params?: Record<string, string>;
  failure_strategy: FailureStrategy;
  worker_group: string;
  warning_type: WarningType;
  warning_group_id?: number;
  priority: Priority;
  dry_run: boolean;
  start_tasks?: string[];
  scope?: Scope;
}

type DocParams = Record<string, unknown> | { prop: string; value?: unknown }[] | undefined | null;

/** The workflow document's global parameters (a list of {prop, value} or a name -> value map) as rows. */
export function declaredRows(params: DocParams): ParamRow[] {
  if (!params) return [];
  const pairs: [string, unknown][] = Array.isArray(params)
    ? params.map((p) => [p.prop, p.value])
    : Object.entries(params);
  return pairs.map(([prop, value]) => {
    const text = value === undefined || value === null ? "" : String(value);
    return { prop, value: text, declared: text };
  });
}

export function initialForm(params: DocParams): StartForm {
  return {
    rows: declaredRows(params),
    failureStrategy: "END",
    workerGroup: "default",
    warningType: "NONE",
    alertGroup: "",
    priority: "MEDIUM",
    dryRun: false,
    startTasks: [],
    scope: "TASK_POST",
  };
}

/** The request body, or the rows' errors by row index (an undeclared name, a name given twice, a value
 * without a name): the API refuses an undeclared start parameter, the dialog says so at the row first. */
export function startBody(form: StartForm): { body: StartBody } | { errors: Map<number, string> } {
  const known = form.rows.filter((r) => r.declared !== undefined).map((r) => r.prop);
  const errors = new Map<number, string>();
  const params: Record<string, string> = {};
  const seen = new Set<string>();
  form.rows.forEach((row, i) => {
    if (row.declared !== undefined) {
      seen.add(row.prop);
      if (row.value !== row.declared) params[row.prop] = row.value;
      return;
    }
    const prop = row.prop.trim();
    if (!prop) {
      if (row.value) errors.set(i, tStart.emptyName);
      return;
    }
    if (!known.includes(prop)) errors.set(i, tStart.undeclared(known));
    else if (seen.has(prop)) errors.set(i, tStart.duplicate);
    seen.add(prop);
    params[prop] = row.value;
  });
  if (errors.size) return { errors };
  const body: StartBody = {
    failure_strategy: form.failureStrategy,
    worker_group: form.workerGroup,
    warning_type: form.warningType,
    priority: form.priority,
    dry_run: form.dryRun,
  };
  if (Object.keys(params).length) body.params = params;
  if (form.alertGroup) body.warning_group_id = Number(form.alertGroup);
  if (form.startTasks.length) {
    body.start_tasks = form.startTasks;
    body.scope = form.scope;
  }
  return { body };
}

/** The row a server refusal names ("params.<name>"), or -1. */
export function rowOfField(rows: readonly ParamRow[], field: string | undefined): number {
  if (!field?.startsWith("params.")) return -1;
  const name = field.slice("params.".length);
  return rows.findIndex((r) => r.prop.trim() === name);
}
