// The workflow's own fields (shown when no task is selected): name, project, description and the global
// parameters, in either of the document's forms (a name -> value object or a list of {prop, value, ...}).
import { useMe } from "../../api/queries";
import type { Draft } from "./draft";
import { tWorkflowForm as t } from "./strings";

export interface GlobalParam {
  prop: string;
  value: string;
  /** other keys of a list entry (direct, type), kept as they were */
  rest?: Record<string, unknown>;
}

export function readGlobals(params: Draft["params"]): GlobalParam[] {
  if (!params) return [];
  if (Array.isArray(params))
    return (params as Record<string, unknown>[]).map(({ prop, value, ...rest }) => ({
      prop: String(prop ?? ""),
      value: value === undefined ? "" : String(value as string),
      rest,
    }));
  return Object.entries(params as Record<string, unknown>).map(([prop, value]) => ({
    prop,
    value: String(value as string),
  }));
}

/** Back to the document: the list form (what the server returns), every row with its name. */
export function writeGlobals(rows: readonly GlobalParam[]): Draft["params"] {
  return rows.map((r) => ({ ...(r.rest ?? {}), prop: r.prop, value: r.value })) as Draft["params"];
}

export function WorkflowForm({
  draft,
  error,
  onChange,
}: {
  draft: Draft;
  error: { field: string; message: string } | null;
  onChange: (next: Draft) => void;
}) {
  const projects = useMe().data?.projects.map((p) => p.name);
  const project = (draft.project ?? "").trim();
  const creates = projects !== undefined && project !== "" && !projects.includes(project);
  const rows = readGlobals(draft.params);
  const setRows = (next: GlobalParam[]) => onChange({ ...draft, params: writeGlobals(next) });
  const at = (field: string) =>
    error &&
    (error.field === field || error.field.startsWith(`${field}[`) || error.field.startsWith(`${field}.`))
      ? error.message
      : undefined;
  const text = (field: "name" | "project" | "description", label: string) => (
    <div className={`form-field${at(field) ? " invalid" : ""}`}>
      <label htmlFor={`wf-${field}`}>{label}</label>
      <input
        id={`wf-${field}`}
        value={draft[field] ?? ""}
        list={field === "project" ? "wf-projects" : undefined}
        aria-describedby={field === "project" && creates ? "wf-project-new" : undefined}
        onChange={(e) => onChange({ ...draft, [field]: e.target.value })}
      />
      {field === "project" && (
        <datalist id="wf-projects">
          {projects?.map((name) => (
            <option key={name} value={name} />
          ))}
        </datalist>
      )}
      {field === "project" && creates && (
        <div className="hint" id="wf-project-new" data-testid="new-project-hint">
          {t.newProject(project)}
        </div>
      )}
      {at(field) && (
        <div className="error-inline" role="alert">
          {at(field)}
        </div>
      )}
    </div>
  );
  return (
    <aside className="task-form" aria-label={t.form} data-testid="workflow-form">
      <h2>{t.heading}</h2>
      {text("name", t.name)}
      {text("project", t.project)}
      {text("description", t.description)}
      <fieldset>
        <legend>{t.globals}</legend>
        {rows.map((r, i) => (
          <div className="param-row" key={i}>
            <input
              aria-label={t.paramName(i + 1)}
              value={r.prop}
              onChange={(e) => setRows(rows.map((x, j) => (j === i ? { ...x, prop: e.target.value } : x)))}
            />
            <input
              aria-label={t.paramValue(i + 1)}
              value={r.value}
              onChange={(e) => setRows(rows.map((x, j) => (j === i ? { ...x, value: e.target.value } : x)))}
            />
            <button
              className="link"
              aria-label={t.removeParam(r.prop || String(i + 1))}
              onClick={() => setRows(rows.filter((_, j) => j !== i))}
            >
              ✕
            </button>
          </div>
        ))}
        <button onClick={() => setRows([...rows, { prop: "", value: "" }])}>{t.addParam}</button>
        {at("params") && (
          <div className="error-inline" role="alert">
            {at("params")}
          </div>
        )}
      </fieldset>
      <p className="muted small">{t.help}</p>
    </aside>
  );
}
