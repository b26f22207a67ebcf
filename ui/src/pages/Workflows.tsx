import { useQueryClient } from "@tanstack/react-query";
import { useState } from "react";
import { Link } from "react-router";

import { useMe, useWorkflows, workflowAction, type WorkflowAction } from "../api/queries";
import { BatchReport } from "../components/BatchReport";
import { runBatch, type BatchOutcome } from "../components/batch";
import { ErrorBox, Loading } from "../components/ErrorBox";
import { Pager, SelectAll, useSelection, useUrlFilters } from "../components/listing";
import { labelOf, symbolOf, toneOf } from "../components/state";
import { Time } from "../components/Time";
import { lackingCreate } from "../features/access/rights";
import { NextFire } from "../features/workflow/FireTimes";
import { tTitle } from "../components/strings";
import { useTitle } from "../components/title";

const SIZE = 50;

export function Workflows() {
  useTitle(tTitle.workflows);
  const { params, set, page } = useUrlFilters();
  const search = params.get("search") ?? "";
  const release = params.get("release") ?? "";
  const query = useWorkflows({
    page,
    size: SIZE,
    ...(search ? { search } : {}),
    ...(release === "ONLINE" || release === "OFFLINE" ? { release_state: release } : {}),
  });
  const selection = useSelection();
  const selected = selection.selected;
  const [outcome, setOutcome] = useState<BatchOutcome | null>(null);
  const client = useQueryClient();
  const me = useMe().data;

  const batch = async (what: WorkflowAction) => {
    setOutcome(await runBatch([...selected], (code) => workflowAction(code, what)));
    selection.clear();
    void client.invalidateQueries({ queryKey: ["workflows"] });
    void client.invalidateQueries({ queryKey: ["instances"] });
  };
  const data = query.data;
  const mayCreate = lackingCreate(me);
  return (
    <section>
      <div className="pagehead">
        <h1>Workflows</h1>
        {mayCreate === null ? (
          <Link to="/workflows/new">New workflow</Link>
        ) : (
          <button disabled title={mayCreate}>
            New workflow
          </button>
        )}
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
                  <SelectAll ids={data.items.map((w) => w.code)} selection={selection} />
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
                      onChange={() => selection.toggle(w.code)}
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
                  <td data-testid={`next-fire-${w.code}`}>
                    {w.next_fire_timezone ? (
                      <NextFire iso={w.next_fire_time} zone={w.next_fire_timezone} />
                    ) : (
                      <Time iso={w.next_fire_time} />
                    )}
                  </td>
                  <td>
                    <Time iso={w.update_time} />
                  </td>
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
          <Pager
            page={page}
            total={data.total}
            size={SIZE}
            noun="workflows"
            onPage={(n) => set("page", String(n))}
          />
        </>
      )}
    </section>
  );
}
