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
import { tInstances, tWorkflows as t } from "./strings";
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
        <h1>{t.title}</h1>
        {mayCreate === null ? (
          <Link to="/workflows/new">{t.newWorkflow}</Link>
        ) : (
          <button disabled title={mayCreate}>
            {t.newWorkflow}
          </button>
        )}
      </div>
      <div className="toolbar" role="search">
        <input
          type="search"
          aria-label={t.searchLabel}
          placeholder={t.searchPlaceholder}
          defaultValue={search}
          onChange={(e) => set("search", e.target.value.trim())}
        />
        <select value={release} onChange={(e) => set("release", e.target.value)} aria-label={t.releaseLabel}>
          <option value="">{t.bothStates}</option>
          <option value="ONLINE">{t.online}</option>
          <option value="OFFLINE">{t.offline}</option>
        </select>
        <span className="spacer" />
        <span className="muted">{tInstances.selected(selected.size)}</span>
        {(["online", "offline", "start"] as const).map((a) => (
          <button key={a} disabled={!selected.size} onClick={() => void batch(a)}>
            {a === "start" ? t.start : a === "online" ? t.putOnline : t.putOffline}
          </button>
        ))}
      </div>
      <BatchReport outcome={outcome} what={t.noun} />
      <ErrorBox error={query.error} title={t.cannotList} />
      {!data && query.isPending && <Loading what={t.noun} />}
      {data && (
        <>
          <table className="grid" data-testid="workflows">
            <thead>
              <tr>
                <th>
                  <SelectAll ids={data.items.map((w) => w.code)} selection={selection} />
                </th>
                <th>{t.name}</th>
                <th>{t.project}</th>
                <th>{t.version}</th>
                <th>{t.release}</th>
                <th>{t.lastRuns}</th>
                <th>{t.nextFire}</th>
                <th>{t.updated}</th>
              </tr>
            </thead>
            <tbody>
              {data.items.map((w) => (
                <tr key={w.code}>
                  <td>
                    <input
                      type="checkbox"
                      aria-label={t.select(w.name)}
                      checked={selected.has(w.code)}
                      onChange={() => selection.toggle(w.code)}
                    />
                  </td>
                  <td>
                    <Link to={`/workflows/${w.code}`}>{w.name}</Link>
                  </td>
                  <td>{w.project}</td>
                  <td>{t.versionOf(w.version)}</td>
                  <td>
                    <span className={`release release-${w.release_state}`}>
                      {w.release_state === "ONLINE" ? t.isOnline : t.isOffline}
                    </span>
                  </td>
                  <td>
                    <span className="strip">
                      {w.last_runs.map((r) => (
                        <Link
                          key={r.id}
                          to={`/instances/${r.id}`}
                          className={`tone-${toneOf(r.state)}`}
                          title={`#${r.id} ${labelOf(r.state)}`}
                          aria-label={t.run(r.id, labelOf(r.state))}
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
                    {t.none}
                  </td>
                </tr>
              )}
            </tbody>
          </table>
          <Pager
            page={page}
            total={data.total}
            size={SIZE}
            noun={t.noun}
            onPage={(n) => set("page", String(n))}
          />
        </>
      )}
    </section>
  );
}
