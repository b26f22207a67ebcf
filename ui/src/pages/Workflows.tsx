import { useQueryClient } from "@tanstack/react-query";
import { useState } from "react";
import { Link, useSearchParams } from "react-router";

import { useWorkflows, workflowAction, type WorkflowAction } from "../api/queries";
import { BatchReport } from "../components/BatchReport";
import { runBatch, type BatchOutcome } from "../components/batch";
import { ErrorBox, Loading } from "../components/ErrorBox";
import { labelOf, symbolOf, toneOf } from "../components/state";
import { formatTime } from "../components/time";

const SIZE = 50;

export function Workflows() {
  const [params, setParams] = useSearchParams();
  const search = params.get("search") ?? "";
  const release = params.get("release") ?? "";
  const page = Number(params.get("page") ?? "1") || 1;
  const query = useWorkflows({
    page,
    size: SIZE,
    ...(search ? { search } : {}),
    ...(release === "ONLINE" || release === "OFFLINE" ? { release_state: release } : {}),
  });
  const [selected, setSelected] = useState<Set<number>>(new Set());
  const [outcome, setOutcome] = useState<BatchOutcome | null>(null);
  const client = useQueryClient();

  const set = (name: string, value: string) => {
    const next = new URLSearchParams(params);
    if (value) next.set(name, value);
    else next.delete(name);
    if (name !== "page") next.delete("page");
    setParams(next, { replace: true });
  };
  const batch = async (what: WorkflowAction) => {
    setOutcome(await runBatch([...selected], (code) => workflowAction(code, what)));
    setSelected(new Set());
    void client.invalidateQueries({ queryKey: ["workflows"] });
    void client.invalidateQueries({ queryKey: ["instances"] });
  };
  const data = query.data;
  const pages = data ? Math.max(1, Math.ceil(data.total / SIZE)) : 1;
  return (
    <section>
      <div className="pagehead">
        <h1>Workflows</h1>
        <Link to="/workflows/new">New workflow</Link>
      </div>
      <div className="toolbar" role="search">
        <input
          type="search"
          aria-label="Search workflows by name"
          placeholder="Search by name"
          defaultValue={search}
          onChange={(e) => set("search", e.target.value.trim())}
        />
        <select value={release} onChange={(e) => set("release", e.target.value)} aria-label="Release state">
          <option value="">online and offline</option>
          <option value="ONLINE">online</option>
          <option value="OFFLINE">offline</option>
        </select>
        <span className="spacer" />
        <span className="muted">{selected.size} selected</span>
        {(["online", "offline", "start"] as const).map((a) => (
          <button key={a} disabled={!selected.size} onClick={() => void batch(a)}>
            {a === "start" ? "Start" : a === "online" ? "Online" : "Offline"}
          </button>
        ))}
      </div>
      <BatchReport outcome={outcome} what="workflows" />
      <ErrorBox error={query.error} title="Cannot list workflows" />
      {!data && query.isPending && <Loading what="workflows" />}
      {data && (
        <>
          <table className="grid" data-testid="workflows">
            <thead>
              <tr>
                <th>
                  <input
                    type="checkbox"
                    aria-label="Select all on this page"
                    checked={data.items.length > 0 && data.items.every((w) => selected.has(w.code))}
                    onChange={(e) =>
                      setSelected(e.target.checked ? new Set(data.items.map((w) => w.code)) : new Set())
                    }
                  />
                </th>
                <th>Name</th>
                <th>Project</th>
                <th>Version</th>
                <th>Release</th>
                <th>Last runs (newest left)</th>
                <th>Next fire</th>
                <th>Updated</th>
              </tr>
            </thead>
            <tbody>
              {data.items.map((w) => (
                <tr key={w.code}>
                  <td>
                    <input
                      type="checkbox"
                      aria-label={`Select ${w.name}`}
                      checked={selected.has(w.code)}
                      onChange={() => {
                        const next = new Set(selected);
                        if (next.has(w.code)) next.delete(w.code);
                        else next.add(w.code);
                        setSelected(next);
                      }}
                    />
                  </td>
                  <td>
                    <Link to={`/workflows/${w.code}`}>{w.name}</Link>
                  </td>
                  <td>{w.project}</td>
                  <td>v{w.version}</td>
                  <td>
                    <span className={`release release-${w.release_state}`}>
                      {w.release_state === "ONLINE" ? "● online" : "○ offline"}
                    </span>
                  </td>
                  <td>
                    <span className="strip">
                      {w.last_runs.map((r) => (
                        <Link
                          key={r.id}
                          to={`/instances/${r.id}`}
                          className={`tone-${toneOf(r.state)}`}
                          title={`#${r.id} ${r.state}`}
                          aria-label={`instance ${r.id}: ${labelOf(r.state)}`}
                        >
                          {symbolOf(r.state)}
                        </Link>
                      ))}
                    </span>
                  </td>
                  <td>{formatTime(w.next_fire_time)}</td>
                  <td>{formatTime(w.update_time)}</td>
                </tr>
              ))}
              {data.items.length === 0 && (
                <tr>
                  <td colSpan={8} className="muted">
                    No workflow matches.
                  </td>
                </tr>
              )}
            </tbody>
          </table>
          <nav className="pager" aria-label="Pages">
            <button disabled={page <= 1} onClick={() => set("page", String(page - 1))}>
              ← Previous
            </button>
            <span>
              page {page} of {pages} ({data.total} workflows)
            </span>
            <button disabled={page >= pages} onClick={() => set("page", String(page + 1))}>
              Next →
            </button>
          </nav>
        </>
      )}
    </section>
  );
}
