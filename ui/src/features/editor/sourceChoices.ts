// Pure: the ``datasource`` parameter of SQL and PROCEDURE tasks as a choice among the data sources the caller
// may use (GET /api/v1/datasources lists those), of the types the task runs on (PROCEDURE: PostgreSQL and
// MySQL; the task's own ``type`` when it gives one). The server checks the same on save (400 at the field).
import type { Field } from "./schemaFields";

/** Task types that name a data source, and the data-source types each runs on. */
export const SOURCE_TASK_TYPES: Readonly<Record<string, readonly string[]>> = {
  SQL: ["POSTGRESQL", "MYSQL", "HIVE", "CLICKHOUSE"],
  PROCEDURE: ["POSTGRESQL", "MYSQL"],
};

export interface ListedSource {
  name?: string;
  type?: string;
}

/** The names a task of ``taskType`` (with ``params``) may pick, sorted. */
export function usableSources(
  taskType: string,
  params: Record<string, unknown>,
  sources: readonly ListedSource[],
): string[] {
  const runsOn = SOURCE_TASK_TYPES[taskType] ?? [];
  const wanted = typeof params.type === "string" && params.type ? params.type.toUpperCase() : undefined;
  return sources
    .filter((s) => s.name && s.type && runsOn.includes(s.type) && (!wanted || s.type === wanted))
    .map((s) => s.name ?? "")
    .sort();
}

/** ``fields`` with the task's datasource field turned into a choice of the usable sources (the value it
 * holds stays offered when it is not one, so the form shows it and the server's refusal next to it). */
export function withSourceChoices(
  fields: readonly Field[],
  taskType: string,
  params: Record<string, unknown>,
  sources: readonly ListedSource[] | undefined,
): Field[] {
  if (!SOURCE_TASK_TYPES[taskType] || sources === undefined) return [...fields];
  const names = usableSources(taskType, params, sources);
  const current = typeof params.datasource === "string" ? params.datasource : "";
  const options = current && !names.includes(current) ? [current, ...names] : names;
  return fields.map((f) => (f.name === "datasource" ? { ...f, kind: "choice", options } : f));
}
