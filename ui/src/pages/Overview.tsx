import { Link } from "react-router";

import { useOverview } from "../api/queries";
import { ErrorBox, Loading } from "../components/ErrorBox";
import { StateBadge } from "../components/StateBadge";
import { labelOf, toneOf } from "../components/state";
import { Time } from "../components/Time";
import { useLive } from "../features/live/useLive";
import { tOverview as t } from "./strings";
import { tTitle } from "../components/strings";
import { useTitle } from "../components/title";

const ORDER = [
  "RUNNING_EXECUTION",
  "SUBMITTED_SUCCESS",
  "SERIAL_WAIT",
  "SUCCESS",
  "FAILURE",
  "STOP",
  "PAUSE",
];

function Counts({ title, counts }: { title: string; counts: Record<string, number> }) {
  const states = Object.keys(counts).sort(
    (a, b) => ((ORDER.indexOf(a) + 99) % 99) - ((ORDER.indexOf(b) + 99) % 99),
  );
  const total = Object.values(counts).reduce((a, b) => a + b, 0);
  return (
    <div className="card">
      <h2>{title}</h2>
      <div className="stack" aria-hidden="true">
        {states.map((s) => (
          <i
            key={s}
            className={`bar-run tone-${toneOf(s)}`}
            style={{ flexGrow: counts[s] }}
            title={`${labelOf(s)}: ${counts[s]}`}
          />
        ))}
      </div>
      <ul className="counts">
        {states.map((s) => (
          <li key={s}>
            <Link to={`/instances?state=${s}`}>
              <StateBadge state={s} /> {counts[s]}
            </Link>
          </li>
        ))}
        {total === 0 && <li className="muted">{t.noInstances}</li>}
      </ul>
    </div>
  );
}

export function OverviewPage() {
  useTitle(tTitle.overview);
  useLive();
  const query = useOverview();
  const data = query.data;
  return (
    <section>
      <h1>{t.title}</h1>
      <ErrorBox error={query.error} title={t.cannotLoad} />
      {!data && query.isPending && <Loading what={t.what} />}
      {data && (
        <div className="cards">
          <Counts title={t.lastDay} counts={data.last_day} />
          <Counts title={t.lastWeek} counts={data.last_week} />
          <div className="card">
            <h2>{t.cluster}</h2>
            <p>
              {data.cluster.registry ? (
                <span className="state state-ok">{t.registryUp}</span>
              ) : (
                <span className="state state-bad">{t.registryDown}</span>
              )}
            </p>
            <p>
              <Link to="/cluster">{t.members(data.cluster.masters, data.cluster.workers)}</Link>
            </p>
            {data.cluster.unhealthy.length > 0 && (
              <p className="state state-bad">{t.notNormal(data.cluster.unhealthy.join(", "))}</p>
            )}
          </div>
          <div className="card wide">
            <h2>
              {t.running(data.running_total)} <Link to="/instances?state=RUNNING_EXECUTION">{t.all}</Link>
            </h2>
            <ul className="plain">
              {data.running.map((i) => (
                <li key={i.id}>
                  <StateBadge state={i.state} /> <Link to={`/instances/${i.id}`}>{i.name}</Link>{" "}
                  <span className="muted">
                    {t.since} <Time iso={i.start_time} />
                  </span>
                </li>
              ))}
              {data.running.length === 0 && <li className="muted">{t.nothingRuns}</li>}
            </ul>
          </div>
          <div className="card wide" data-testid="recent-failures">
            <h2>
              {t.failures} <Link to="/instances?state=FAILURE">{t.all}</Link>
            </h2>
            <ul className="plain">
              {data.failures.map((i) => (
                <li key={i.id}>
                  <StateBadge state={i.state} /> <Link to={`/instances/${i.id}`}>{i.name}</Link>{" "}
                  <span className="muted">
                    <Time iso={i.end_time} />
                  </span>{" "}
                  {i.failed_task && (
                    <Link to={`/tasks/${i.failed_task.id}/log`}>{t.failedLog(i.failed_task.name)}</Link>
                  )}
                </li>
              ))}
              {data.failures.length === 0 && <li className="muted">{t.noFailures}</li>}
            </ul>
          </div>
        </div>
      )}
    </section>
  );
}
