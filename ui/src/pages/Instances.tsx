import { useState } from "react";
import { Link } from "react-router";

import { useInstanceAction, useInstances, useMe, type InstanceAction } from "../api/queries";
import { BatchReport } from "../components/BatchReport";
import { runBatch, type BatchOutcome } from "../components/batch";
import { ErrorBox, Loading } from "../components/ErrorBox";
import { Pager, SelectAll, useSelection, useUrlFilters } from "../components/listing";
import { StateBadge } from "../components/StateBadge";
import { Time } from "../components/Time";
import { formatDuration } from "../components/time";
import { lacking } from "../features/access/rights";
import { filtersOf, InstanceFiltersBar } from "../features/instances/Filters";
import { RunType } from "../features/workflow/RunType";
import { useLive } from "../features/live/useLive";
import { tInstances as t } from "./strings";
import { tTitle } from "../components/strings";
import { useTitle } from "../components/title";

const SIZE = 50;

export function Instances() {
  useTitle(tTitle.instances);
  useLive();
  const { params, set, clear, page } = useUrlFilters();
  // a value the server would refuse is said at its field by the bar, and left out of the request
  const filters = { page, size: SIZE, ...filtersOf(params).filters };
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
  return (
    <section>
      <h1>{t.title}</h1>
      <InstanceFiltersBar params={params} set={set} clear={clear} />
      <div className="toolbar">
        <span className="spacer" />
        <span className="muted">{t.selected(selected.size)}</span>
        <button
          disabled={!selected.size || refused !== undefined}
          title={refused ?? ""}
          onClick={() => void batch("stop")}
        >
          {t.stop}
        </button>
        <button
          disabled={!selected.size || refused !== undefined}
          title={refused ?? ""}
          onClick={() => void batch("rerun")}
        >
          {t.rerun}
        </button>
        <button
          disabled={!selected.size || refused !== undefined}
          title={refused ?? ""}
          onClick={() => void batch("recover-failed")}
        >
          {t.recoverFailed}
        </button>
      </div>
      <BatchReport outcome={outcome} what={t.noun} />
      <ErrorBox error={query.error} title={t.cannotList} />
      {!data && query.isPending && <Loading what={t.noun} />}
      {data && (
        <>
          <table className="grid" data-testid="instances">
            <thead>
              <tr>
                <th>
                  <SelectAll ids={data.items.map((i) => i.id)} selection={selection} />
                </th>
                <th>{t.id}</th>
                <th>{t.name}</th>
                <th>{t.state}</th>
                <th>{t.runType}</th>
                <th>{t.businessDate}</th>
                <th>{t.started}</th>
                <th>{t.duration}</th>
                <th>{t.host}</th>
              </tr>
            </thead>
            <tbody>
              {data.items.map((i) => (
                <tr key={i.id} data-testid={`instance-${i.id}`}>
                  <td>
                    <input
                      type="checkbox"
                      aria-label={t.select(i.id)}
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
                    {t.none}
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
            noun={t.noun}
            onPage={(n) => set("page", String(n))}
          />
        </>
      )}
    </section>
  );
}
