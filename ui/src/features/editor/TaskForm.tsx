// The side form of the selected task: its name, type and scheduling fields (from the workflow document's
// task schema) and its parameters (from its type's schema, GET /api/v1/task-types), with the server's
// errors shown at the field they name.
import { useMemo, useState } from "react";

import { useDataSources } from "../../api/queries";
import { upstreamOf } from "../graph/buildGraph";
import type { DraftTask } from "./draft";
import { LocalParams } from "./LocalParams";
import { rowsOf } from "./localParams";
import { FieldInput, ParamFields } from "./ParamFields";
import { fieldsOf, templateOf, type Field, type JsonSchema } from "./schemaFields";
import { SOURCE_TASK_TYPES, withSourceChoices } from "./sourceChoices";
import { SwitchBranches } from "./SwitchBranches";
import { missingLinks, switchOf, withSwitch } from "./switchParams";

/** Params with a form of their own (rows) rather than a schema field. */
const OWN_FORM = new Set(["localParams"]);
const SWITCH_FORM = new Set(["cases", "default"]);

/** The task fields every type has (the document's Task schema, engine/workflows/document.py). */
const TASK_FIELDS: Field[] = fieldsOf({
  properties: {
    description: { type: "string" },
    disabled: {
      type: "boolean",
      description: "switched off: never runs; its downstream runs as though it had succeeded",
    },
    retries: { type: "integer", description: "extra attempts after a failure" },
    retry_interval: { type: "integer", description: "minutes between a failure and the retry" },
    timeout: { type: "integer", description: "minutes; 0 = none" },
    timeout_strategy: { enum: ["WARN", "FAILED", "WARNFAILED"] },
    priority: { enum: ["HIGHEST", "HIGH", "MEDIUM", "LOW", "LOWEST"], default: "MEDIUM" },
    worker_group: { type: "string", default: "default" },
    delay_time: { type: "integer", description: "minutes to wait before the task starts" },
    task_group: { type: "string", description: "task group whose slots it takes while it runs" },
    alert_on: {
      type: "array",
      description: 'the task\'s own alerts, e.g. ["failure", "retry"] (failure | success | retry | timeout)',
    },
    alert_group: { type: "string", description: "alert group of its alerts; default: the run's group" },
  },
});

/** ``field`` of an error inside a task ("params.rawScript", "upstream") -> its first step after params. */
function paramErrors(error: { field: string; message: string } | null): Map<string, string> {
  const out = new Map<string, string>();
  if (error?.field.startsWith("params.")) {
    const name = error.field.slice("params.".length).split(/[.[]/)[0] ?? "";
    out.set(name, error.message);
  }
  return out;
}

/** Add a link without dragging: pick the task this one waits for. */
function LinkPicker({ options, onLink }: { options: readonly string[]; onLink: (name: string) => void }) {
  const [pick, setPick] = useState("");
  if (options.length === 0) return null;
  return (
    <div className="inline-form">
      <input
        aria-label="Wait also for"
        list="link-options"
        placeholder="wait also for…"
        value={pick}
        onChange={(e) => setPick(e.target.value)}
      />
      <datalist id="link-options">
        {options.slice(0, 500).map((o) => (
          <option key={o} value={o} />
        ))}
      </datalist>
      <button
        disabled={!options.includes(pick)}
        onClick={() => {
          onLink(pick);
          setPick("");
        }}
      >
        Link
      </button>
    </div>
  );
}

export function TaskForm({
  task,
  types,
  error,
  onChange,
  onRename,
  onRemove,
  onUnlink,
  others,
  onLink,
  tasks = [],
  onLinkBelow,
}: {
  task: DraftTask;
  types: ReadonlyMap<string, JsonSchema>;
  /** the server's refusal, when it concerns this task: the field inside the task and the message */
  error: { field: string; message: string } | null;
  onChange: (next: DraftTask) => void;
  onRename: (name: string) => string | undefined;
  onRemove: () => void;
  onUnlink: (upstream: string) => void;
  /** the other tasks' names: a link can be added from the keyboard too */
  others: readonly string[];
  onLink: (upstream: string) => void;
  /** the workflow's tasks (a SWITCH branch picks one) */
  tasks?: readonly DraftTask[];
  /** link this task above ``downstream`` (a SWITCH branch's task) */
  onLinkBelow?: (downstream: string) => void;
}) {
  const [name, setName] = useState(task.name);
  const [renameProblem, setRenameProblem] = useState<string>();
  const schema = types.get(task.type);
  const params = (task.params ?? {}) as Record<string, unknown>;
  const sources = useDataSources(SOURCE_TASK_TYPES[task.type] !== undefined);
  const isSwitch = task.type === "SWITCH";
  const fields = useMemo(
    () =>
      withSourceChoices(fieldsOf(schema), task.type, params, sources.data?.items).filter(
        (f) => !OWN_FORM.has(f.name) && !(isSwitch && SWITCH_FORM.has(f.name)),
      ),
    // params.type and params.datasource decide the choices; the other params do not
    // eslint-disable-next-line react-hooks/exhaustive-deps
    [schema, task.type, params.type, params.datasource, sources.data, isSwitch],
  );
  /** the server's refusal inside the params ("cases[0].condition", "localParams"), else null */
  const paramError = error?.field.startsWith("params.")
    ? { field: error.field.slice("params.".length), message: error.message }
    : null;
  const setParams = (next: Record<string, unknown>) => onChange({ ...task, params: next });
  const errors = paramErrors(error);
  const taskError = error && !error.field.startsWith("params.") ? error : null;
  const record = task as unknown as Record<string, unknown>;
  const commitName = () => {
    if (name !== task.name) setRenameProblem(onRename(name.trim()));
  };

  return (
    <aside className="task-form" aria-label={`Task ${task.name}`} data-testid="task-form">
      <div className="task-form-head">
        <h2>Task</h2>
        <button className="danger" onClick={onRemove}>
          Delete task
        </button>
      </div>
      {taskError && !["name", "type", "upstream"].includes(taskError.field) && (
        <div className="error" role="alert">
          {taskError.field || "task"}: {taskError.message}
        </div>
      )}
      <div className={`form-field${renameProblem || taskError?.field === "name" ? " invalid" : ""}`}>
        <label htmlFor="task-name">name *</label>
        <input
          id="task-name"
          value={name}
          onChange={(e) => setName(e.target.value)}
          onBlur={commitName}
          onKeyDown={(e) => e.key === "Enter" && commitName()}
        />
        {(renameProblem ?? (taskError?.field === "name" ? taskError.message : undefined)) && (
          <div className="error-inline" role="alert">
            {renameProblem ?? taskError?.message}
          </div>
        )}
      </div>
      <div className={`form-field${taskError?.field === "type" ? " invalid" : ""}`}>
        <label htmlFor="task-type">type *</label>
        <select
          id="task-type"
          value={task.type}
          onChange={(e) => {
            onChange({ ...task, type: e.target.value, params: templateOf(types.get(e.target.value)) });
          }}
        >
          {!types.has(task.type) && <option>{task.type}</option>}
          {[...types.keys()].map((t) => (
            <option key={t}>{t}</option>
          ))}
        </select>
        {taskError?.field === "type" && (
          <div className="error-inline" role="alert">
            {taskError.message}
          </div>
        )}
      </div>
      <div className="form-field">
        <span className="label">waits for</span>
        {upstreamOf(task).length === 0 ? (
          <span className="muted small">nothing (drag from another task's right edge to this one)</span>
        ) : (
          <ul className="links">
            {upstreamOf(task).map((u) => (
              <li key={u}>
                {u}{" "}
                <button className="link" aria-label={`remove link from ${u}`} onClick={() => onUnlink(u)}>
                  ✕
                </button>
              </li>
            ))}
          </ul>
        )}
        <LinkPicker
          options={others.filter((o) => o !== task.name && !upstreamOf(task).includes(o))}
          onLink={onLink}
        />
        {taskError?.field === "upstream" && (
          <div className="error-inline" role="alert">
            {taskError.message}
          </div>
        )}
      </div>
      <fieldset>
        <legend>Parameters ({task.type})</legend>
        {!schema && <div className="muted">no parameter schema for this type</div>}
        <ParamFields
          fields={fields}
          values={params}
          errors={errors}
          onChange={(next) => onChange({ ...task, params: next })}
        />
        {isSwitch && (
          <SwitchBranches
            value={switchOf(params)}
            candidates={others.filter((o) => o !== task.name)}
            error={paramError && /^(cases|default)\b/.test(paramError.field) ? paramError : null}
            onChange={(sw) => {
              setParams(withSwitch(params, sw));
              for (const down of missingLinks(task.name, sw, tasks)) onLinkBelow?.(down);
            }}
          />
        )}
        {schema?.properties?.localParams && (
          <LocalParams
            rows={rowsOf(params.localParams)}
            refusal={paramError?.field.startsWith("localParams") ? paramError.message : undefined}
            onChange={(rows) => {
              const next = { ...params };
              if (rows.length) next.localParams = rows;
              else delete next.localParams;
              setParams(next);
            }}
          />
        )}
      </fieldset>
      <details>
        <summary>Scheduling</summary>
        {TASK_FIELDS.map((f) => (
          <FieldInput
            key={f.name}
            field={f}
            value={record[f.name]}
            error={taskError?.field === f.name ? taskError.message : undefined}
            onChange={(v) => {
              const next = { ...record };
              if (v === undefined) delete next[f.name];
              else next[f.name] = v;
              onChange(next as unknown as DraftTask);
            }}
          />
        ))}
      </details>
    </aside>
  );
}
