// The instance list's filters, all kept in the URL (a reload or a shared link keeps them): workflow name
// (autocomplete from the workflows the caller sees), project, business-date range (typed in the display
// zone, kept as UTC instants), run type, host, state. A value the server would refuse is said at its field
// and never sent.
import { useState } from "react";

import type { Instance } from "../../api/client";
import type { InstanceFilters } from "../../api/queries";
import { useProjectNames, useWorkflowNames } from "../../api/queries";
import { labelOf } from "../../components/state";
import { offsetLabel, parseInZone, resolveZone, typedInZone, useDisplayZone } from "../../components/time";
import { tFilters as t } from "./strings";
import { runTypeLabel } from "../workflow/RunType";

export const STATES = [
  "RUNNING_EXECUTION",
  "SUBMITTED_SUCCESS",
  "FAILURE",
  "SUCCESS",
  "STOP",
  "PAUSE",
  "SERIAL_WAIT",
];
export const RUN_TYPES: Instance["run_type"][] = ["manual", "scheduled", "backfill", "rerun", "recovery"];

/** The URL parameters this bar owns (``workflow`` is the code the Workflow page links with). */
const OWNED = [
  "state",
  "workflow",
  "workflow_name",
  "project",
  "run_type",
  "schedule_since",
  "schedule_until",
  "host",
];

const isInstant = (value: string) => /^\d{4}-\d{2}-\d{2}T/.test(value) && !Number.isNaN(Date.parse(value));

/** The filters the URL asks for, as the API takes them, and the fields whose value cannot be sent. */
export function filtersOf(params: URLSearchParams): {
  filters: Omit<InstanceFilters, "page" | "size">;
  bad: Set<string>;
} {
  const filters: Omit<InstanceFilters, "page" | "size"> = {};
  const bad = new Set<string>();
  const text = (name: string) => params.get(name)?.trim() ?? "";
  if (text("state")) filters.state = text("state");
  const code = text("workflow");
  if (code) {
    if (/^\d+$/.test(code)) filters.workflow = Number(code);
    else bad.add("workflow");
  }
  if (text("workflow_name")) filters.workflow_name = text("workflow_name");
  if (text("project")) filters.project = text("project");
  const runType = text("run_type");
  if (runType) {
    if ((RUN_TYPES as string[]).includes(runType)) filters.run_type = runType;
    else bad.add("run_type");
  }
  for (const name of ["schedule_since", "schedule_until"] as const) {
    const value = text(name);
    if (!value) continue;
    if (isInstant(value)) filters[name] = value;
    else bad.add(name);
  }
  if (text("host")) filters.host = text("host");
  return { filters, bad };
}

/** A text field applied on Enter or when it loses focus. */
function Applied({
  id,
  label,
  value,
  placeholder,
  list,
  invalid,
  onApply,
  onType,
}: {
  id: string;
  label: string;
  value: string;
  placeholder: string;
  list?: string;
  invalid?: string;
  onApply: (value: string) => void;
  onType?: (value: string) => void;
}) {
  const [typed, setTyped] = useState(value);
  const [seen, setSeen] = useState(value);
  if (value !== seen) {
    // the URL changed (back, a link, Clear): show what it says
    setSeen(value);
    setTyped(value);
  }
  return (
    <>
      <input
        id={id}
        aria-label={label}
        list={list}
        value={typed}
        placeholder={placeholder}
        aria-invalid={invalid !== undefined}
        aria-describedby={invalid !== undefined ? `${id}-error` : undefined}
        onChange={(e) => {
          setTyped(e.target.value);
          onType?.(e.target.value);
        }}
        onKeyDown={(e) => e.key === "Enter" && onApply(typed.trim())}
        onBlur={() => typed.trim() !== value && onApply(typed.trim())}
      />
      {invalid !== undefined && (
        <span id={`${id}-error`} className="field-error" role="alert">
          {invalid}
        </span>
      )}
    </>
  );
}

/** A business-date bound typed in the display zone; the URL keeps the UTC instant. */
function DateBound({
  id,
  label,
  caption,
  value,
  onApply,
}: {
  id: string;
  label: string;
  caption: string;
  value: string;
  onApply: (iso: string) => void;
}) {
  const zone = useDisplayZone();
  const shown = value && isInstant(value) ? typedInZone(value, zone) : value;
  const [refused, setRefused] = useState<string | null>(null);
  return (
    <label>
      {caption}{" "}
      <Applied
        key={zone}
        id={id}
        label={label}
        value={shown}
        placeholder={t.datePlaceholder}
        invalid={
          refused !== null ? t.notDate(refused) : value && !isInstant(value) ? t.notDate(value) : undefined
        }
        onApply={(text) => {
          if (!text) {
            setRefused(null);
            onApply("");
            return;
          }
          const iso = parseInZone(text, zone);
          if (iso === null) setRefused(text);
          else {
            setRefused(null);
            onApply(iso);
          }
        }}
      />
    </label>
  );
}

export function InstanceFiltersBar({
  params,
  set,
  clear,
}: {
  params: URLSearchParams;
  set: (name: string, value: string) => void;
  clear: (names: string[]) => void;
}) {
  const [search, setSearch] = useState(params.get("workflow_name") ?? "");
  const names = useWorkflowNames(search).data ?? [];
  const projects = useProjectNames().data ?? [];
  const zone = useDisplayZone();
  const label = offsetLabel(new Date(), resolveZone(zone));
  const { bad } = filtersOf(params);
  const get = (name: string) => params.get(name) ?? "";
  const code = get("workflow");
  const project = get("project");
  return (
    <div className="toolbar filters" role="search">
      <label>
        {t.workflow}{" "}
        <Applied
          id="filter-workflow"
          label={t.workflowLabel}
          value={get("workflow_name")}
          placeholder={t.workflowPlaceholder}
          list="workflow-names"
          onType={setSearch}
          onApply={(v) => set("workflow_name", v)}
        />
      </label>
      <datalist id="workflow-names" data-testid="workflow-names">
        {names.map((n) => (
          <option key={n} value={n} />
        ))}
      </datalist>
      {code && (
        <span className="chip">
          {t.workflowCode(code)}{" "}
          <button type="button" aria-label={t.clearCode} onClick={() => set("workflow", "")}>
            ×
          </button>
        </span>
      )}
      {bad.has("workflow") && (
        <span id="workflow-error" className="field-error" role="alert">
          {t.notCode}
        </span>
      )}
      <label>
        {t.project}{" "}
        <select value={project} onChange={(e) => set("project", e.target.value)} aria-label={t.projectLabel}>
          <option value="">{t.any}</option>
          {project && !projects.includes(project) && <option value={project}>{project}</option>}
          {projects.map((p) => (
            <option key={p} value={p}>
              {p}
            </option>
          ))}
        </select>
      </label>
      <DateBound
        id="filter-from"
        label={t.fromLabel}
        caption={t.from(label)}
        value={get("schedule_since")}
        onApply={(v) => set("schedule_since", v)}
      />
      <DateBound
        id="filter-until"
        label={t.untilLabel}
        caption={t.until(label)}
        value={get("schedule_until")}
        onApply={(v) => set("schedule_until", v)}
      />
      <label>
        {t.runType}{" "}
        <select
          value={get("run_type")}
          onChange={(e) => set("run_type", e.target.value)}
          aria-label={t.runTypeLabel}
          aria-invalid={bad.has("run_type")}
        >
          <option value="">{t.any}</option>
          {RUN_TYPES.map((r) => (
            <option key={r} value={r}>
              {runTypeLabel(r)}
            </option>
          ))}
        </select>
      </label>
      <label>
        {t.host}{" "}
        <Applied
          id="filter-host"
          label={t.hostLabel}
          value={get("host")}
          placeholder={t.hostPlaceholder}
          onApply={(v) => set("host", v)}
        />
      </label>
      <label>
        {t.state}{" "}
        <select value={get("state")} onChange={(e) => set("state", e.target.value)} aria-label={t.stateLabel}>
          <option value="">{t.any}</option>
          {STATES.map((s) => (
            <option key={s} value={s}>
              {labelOf(s)}
            </option>
          ))}
        </select>
      </label>
      {OWNED.some((n) => params.get(n)) && (
        <button type="button" onClick={() => clear(OWNED)}>
          {t.clear}
        </button>
      )}
    </div>
  );
}
