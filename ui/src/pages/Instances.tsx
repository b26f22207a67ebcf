import { useState } from "react";
import { Link } from "react-router";

import { useInstanceAction, useInstances, useMe, type InstanceAction } from "../api/queries";
import { BatchReport } from "../components/BatchReport";
import { runBatch, type BatchOutcome } from "../components/batch";
import { ErrorBox, Loading } from "../components/ErrorBox";
import { Pager, SelectAll, useSelection, useUrlFilters } from "../components/listing";
import { labelOf } from "../components/state";
import { StateBadge } from "../components/StateBadge";
import { Time } from "../components/Time";
import { formatDuration } from "../components/time";
import { lacking } from "../features/access/rights";
import { RunType } from "../features/workflow/RunType";
import { useLive } from "../features/live/useLive";

const STATES = [
  "RUNNING_EXECUTION",
  "SUBMITTED_SUCCESS",
  "FAILURE",
  "SUCCESS",
  "STOP",
  "PAUSE",
  "SERIAL_WAIT",
];
const SIZE = 50;
const TEXT = {
  notCode: "a workflow code is a number: open the workflow from the Workflows page to filter by it",
};

export function Instances() {
  useLive();
  const { params, set, page } = useUrlFilters();
  const state = params.get("state") ?? "";
  const workflow = params.get("workflow");
  const workflowCode = workflow && /^\d+$/.test(workflow) ? Number(workflow) : null;
  const filters = {
    page,
    size: SIZE,
    ...(state ? { state } : {}),
    ...(workflowCode !== null ? { workflow: workflowCode } : {}),
  };
  const me = useMe().data;
  const query = useInstances(filters);
  const selection = useSelection();
  const selected = selection.selected;
  const [outcome, setOutcome] = useState<BatchOutcome | null>(null);
  const action = useInstanceAction();

  const batch = async (what: InstanceAction) => {
    setOutcome(await runBatch([...selected], (id) => action.mutateAsync({ id, action: what })));
    selection.clear();
  };

  const data = query.data;
  const projectOf = new Map(data?.items.map((i) => [i.id, i.project_code]) ?? []);
  // the first selected instance the caller may not act on says why the actions are off
  const refused = [...selected]
    .map((id) => lacking(me, projectOf.get(id), "EXECUTE"))
    .find((r) => r !== null);
  const badWorkflow = workflow !== null && workflow !== "" && workflowCode === null;
  return (
    <section>
      <h1>Workflow instances</h1>
      <div className="toolbar" role="search">
        <label>
          State{" "}
          <select value={state} onChange={(e) => set("state", e.target.value)} aria-label="Filter by state">
            <option value="">any</option>
            {STATES.map((s) => (
              <option key={s} value={s}>
                {labelOf(s)}
              </option>
            ))}
          </select>
        </label>
        <label>
          Workflow code{" "}
          <input
            inputMode="numeric"
            aria-invalid={badWorkflow}
            aria-describedby={badWorkflow ? "workflow-error" : undefined}
            defaultValue={workflow ?? ""}
            onKeyDown={(e) =>
              e.key === "Enter" && set("workflow", (e.target as HTMLInputElement).value.trim())
            }
            placeholder="Enter to apply"
          />
        </label>
        {badWorkflow && (
          <span id="workflow-error" className="field-error" role="alert">
            {TEXT.notCode}
          </span>
        )}
        <span className="spacer" />
        <span className="muted">{selected.size} selected</span>
        <button
          disabled={!selected.size || refused !== undefined}
          title={refused ?? ""}
          onClick={() => void batch("stop")}
        >
          Stop
        </button>
        <button
          disabled={!selected.size || refused !== undefined}
          title={refused ?? ""}
          onClick={() => void batch("rerun")}
        >
          Rerun
        </button>
        <button
          disabled={!selected.size || refused !== undefined}
          title={refused ?? ""}
          onClick={() => void batch("recover-failed")}
        >
          Recover failed
        </button>
      </div>
      <BatchReport outcome={outcome} what="instances" />
      <ErrorBox error={query.error} title="Cannot list instances" />
      {!data && query.isPending && <Loading what="instances" />}
      {data && (
        <>
          <table className="grid" data-testid="instances">
            <thead>
              <tr>
                <th>
                  <SelectAll ids={data.items.map((i) => i.id)} selection={selection} />
                </th>
                <th>Id</th>
                <th>Name</th>
                <th>State</th>
                <th>Run type</th>
                <th>Business date</th>
                <th>Started</th>
                <th>Duration</th>
                <th>Host</th>
              </tr>
            </thead>
            <tbody>
              {data.items.map((i) => (
                <tr key={i.id} data-testid={`instance-${i.id}`}>
                  <td>
                    <input
                      type="checkbox"
                      aria-label={`Select instance ${i.id}`}
                      checked={selected.has(i.id)}
                      onChange={() => selection.toggle(i.id)}
                    />
                  </td>
                  <td>{i.id}</td>
                  <td>
                    <Link to={`/instances/${i.id}`}>{i.name}</Link>
                  </td>
                  <td>
                    <StateBadge state={i.state} />
                  </td>
                  <td>
                    <RunType type={i.run_type} />
                  </td>
                  <td>
                    <Time iso={i.schedule_time} />
                  </td>
                  <td>
                    <Time iso={i.start_time} />
                  </td>
                  <td>{formatDuration(i.duration_ms)}</td>
                  <td className="muted">{i.host ?? "—"}</td>
                </tr>
              ))}
              {data.items.length === 0 && (
                <tr>
                  <td colSpan={9} className="muted">
                    No instance matches.
                  </td>
                </tr>
              )}
            </tbody>
          </table>
          <Pager
            page={page}
            total={data.total}
            capped={data.total_capped ?? false}
            size={SIZE}
            noun="instances"
            onPage={(n) => set("page", String(n))}
          />
        </>
      )}
    </section>
  );
}
