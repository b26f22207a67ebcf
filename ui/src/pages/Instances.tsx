import { useState } from "react";
import { Link, useSearchParams } from "react-router";

import { useInstanceAction, useInstances, type InstanceAction } from "../api/queries";
import { BatchReport } from "../components/BatchReport";
import { runBatch, type BatchOutcome } from "../components/batch";
import { ErrorBox, Loading } from "../components/ErrorBox";
import { StateBadge } from "../components/StateBadge";
import { formatDuration, formatTime } from "../components/time";
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

export function Instances() {
  useLive();
  const [params, setParams] = useSearchParams();
  const state = params.get("state") ?? "";
  const workflow = params.get("workflow");
  const page = Number(params.get("page") ?? "1") || 1;
  const filters = {
    page,
    size: SIZE,
    ...(state ? { state } : {}),
    ...(workflow ? { workflow: Number(workflow) } : {}),
  };
  const query = useInstances(filters);
  const [selected, setSelected] = useState<Set<number>>(new Set());
  const [outcome, setOutcome] = useState<BatchOutcome | null>(null);
  const action = useInstanceAction();

  const set = (name: string, value: string) => {
    const next = new URLSearchParams(params);
    if (value) next.set(name, value);
    else next.delete(name);
    if (name !== "page") next.delete("page");
    setParams(next);
  };
  const toggle = (id: number) => {
    const next = new Set(selected);
    if (next.has(id)) next.delete(id);
    else next.add(id);
    setSelected(next);
  };
  const batch = async (what: InstanceAction) => {
    setOutcome(await runBatch([...selected], (id) => action.mutateAsync({ id, action: what })));
    setSelected(new Set());
  };

  const data = query.data;
  const pages = data ? Math.max(1, Math.ceil(data.total / SIZE)) : 1;
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
                {s}
              </option>
            ))}
          </select>
        </label>
        <label>
          Workflow code{" "}
          <input
            inputMode="numeric"
            defaultValue={workflow ?? ""}
            onKeyDown={(e) =>
              e.key === "Enter" && set("workflow", (e.target as HTMLInputElement).value.trim())
            }
            placeholder="Enter to apply"
          />
        </label>
        <span className="spacer" />
        <span className="muted">{selected.size} selected</span>
        <button disabled={!selected.size} onClick={() => void batch("stop")}>
          Stop
        </button>
        <button disabled={!selected.size} onClick={() => void batch("rerun")}>
          Rerun
        </button>
        <button disabled={!selected.size} onClick={() => void batch("recover-failed")}>
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
                  <input
                    type="checkbox"
                    aria-label="Select all on this page"
                    checked={data.items.length > 0 && data.items.every((i) => selected.has(i.id))}
                    onChange={(e) =>
                      setSelected(e.target.checked ? new Set(data.items.map((i) => i.id)) : new Set())
                    }
                  />
                </th>
                <th>Id</th>
                <th>Name</th>
                <th>State</th>
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
                      onChange={() => toggle(i.id)}
                    />
                  </td>
                  <td>{i.id}</td>
                  <td>
                    <Link to={`/instances/${i.id}`}>{i.name}</Link>
                  </td>
                  <td>
                    <StateBadge state={i.state} />
                  </td>
                  <td>{formatTime(i.start_time)}</td>
                  <td>{formatDuration(i.duration_ms)}</td>
                  <td className="muted">{i.host ?? "—"}</td>
                </tr>
              ))}
              {data.items.length === 0 && (
                <tr>
                  <td colSpan={7} className="muted">
                    No instance matches.
                  </td>
                </tr>
              )}
            </tbody>
          </table>
          <nav className="pager" aria-label="Pages">
            <button disabled={page <= 1} onClick={() => set("page", String(page - 1))}>
              ← Newer
            </button>
            <span>
              page {page} of {pages} ({data.total} instances)
            </span>
            <button disabled={page >= pages} onClick={() => set("page", String(page + 1))}>
              Older →
            </button>
          </nav>
        </>
      )}
    </section>
  );
}
