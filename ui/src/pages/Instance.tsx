import { useEffect, useMemo, useState } from "react";
import { Link, useParams } from "react-router";

import {
  allowedActions,
  useInstance,
  useInstanceAction,
  useMe,
  useWaiting,
  useWorkflowVersion,
  type InstanceAction,
} from "../api/queries";
import { BadAddress, idParam } from "../components/BadAddress";
import { ErrorBox, Loading } from "../components/ErrorBox";
import { StateBadge } from "../components/StateBadge";
import { Time } from "../components/Time";
import { formatDuration, useDisplayZone } from "../components/time";
import { lacking } from "../features/access/rights";
import { TaskTable } from "../features/gantt/TaskTable";
import { finishedCount } from "../features/gantt/count";
import { buildGraph, statesByName, type TaskSpec } from "../features/graph/buildGraph";
import { RenderedScript } from "../features/editor/RenderedScript";
import { branchLabels } from "../features/editor/switchParams";
import { DagView } from "../features/graph/DagView";
import { prewarmLayout } from "../features/graph/layout";
import { tWaiting } from "../features/instances/strings";
import { byTask, RunWaiting, waitText, WhyWaiting } from "../features/instances/Waiting";
import { useLive } from "../features/live/useLive";
import { RunType } from "../features/workflow/RunType";
import { tTitle } from "../components/strings";
import { useTitle } from "../components/title";
import { tInstance as t } from "./detailStrings";
import { layoutKeyOf } from "./instancePrefetch";

const ACTIONS: readonly InstanceAction[] = ["stop", "pause", "resume", "recover-failed", "rerun"];

/** Task types the master runs itself: no log, no script. */
const LOGIC_TYPES = new Set(["SWITCH", "CONDITIONS", "SUB_PROCESS", "DEPENDENT"]);

export function InstancePage() {
  const param = useParams().id;
  const id = idParam(param);
  if (id === null) return <BadAddress what={t.noun} value={param} />;
  return <InstanceOf key={id} id={id} />;
}

function InstanceOf({ id }: { id: number }) {
  useLive(id);
  useEffect(prewarmLayout, []);
  const query = useInstance(id);
  const detail = query.data;
  useTitle(tTitle.instance(id), detail?.name);
  const version = useWorkflowVersion(detail?.workflow_code, detail?.workflow_version);
  const action = useInstanceAction();
  const me = useMe().data;
  const [selected, setSelected] = useState<string | null>(null);

  const tasks = version.data?.document.tasks as TaskSpec[] | undefined;
  const graph = useMemo(() => (tasks ? buildGraph(tasks) : null), [tasks]);
  const labels = useMemo(() => (tasks ? branchLabels(tasks) : undefined), [tasks]);
  const current = useMemo(() => (detail ? statesByName(detail.tasks) : new Map()), [detail]);
  const states = useMemo(
    () => new Map([...current].map(([name, t]) => [name, t.state as string])),
    [current],
  );
  const chosen = selected ? current.get(selected) : undefined;
  // asked again whenever the live stream moves a task or the run; polled only while something waits
  const signature = detail ? `${detail.state}:${detail.tasks.map((t) => t.state).join(",")}` : "";
  const waiting = useWaiting(id, !!detail && !detail.finished, signature);
  const answer = detail && !detail.finished ? waiting.data : undefined;
  const why = useMemo(() => byTask(answer), [answer]);
  const chosenWhy = chosen ? why.get(chosen.name) : undefined;
  const zone = useDisplayZone();
  const whyText = useMemo(() => new Map([...why].map(([name, w]) => [name, waitText(w, zone)])), [why, zone]);

  if (query.isPending) return <Loading what={t.loading(id)} />;
  if (!detail) return <ErrorBox error={query.error} title={t.cannotLoad(id)} />;
  const allowed = allowedActions(detail.state);
  const mayExecute = lacking(me, detail.project_code, "EXECUTE");
  const count = finishedCount(detail.tasks);
  return (
    <section>
      <div className="pagehead">
        <h1>
          {detail.name} <StateBadge state={detail.state} />
        </h1>
        <div className="actions" role="group" aria-label={t.actionsLabel}>
          {ACTIONS.map((a) => (
            <button
              key={a}
              disabled={!allowed.includes(a) || action.isPending || mayExecute !== null}
              title={mayExecute ?? (allowed.includes(a) ? "" : t.notWhile(detail.state))}
              onClick={() => action.mutate({ id, action: a })}
            >
              {t.actions[a]}
            </button>
          ))}
        </div>
      </div>
      {mayExecute && (
        <p className="muted" data-testid="rights-note">
          {mayExecute}
        </p>
      )}
      <ErrorBox error={action.error} title={t.actionRefused} />
      <ErrorBox error={query.error} title={t.refreshFailed} />
      <dl className="facts">
        <dt>{t.instance}</dt>
        <dd>#{detail.id}</dd>
        <dt>{t.workflow}</dt>
        <dd>
          <Link to={`/workflows/${detail.workflow_code}`}>
            {t.workflowVersion(detail.workflow_code, detail.workflow_version)}
          </Link>
        </dd>
        <dt>{t.runType}</dt>
        <dd>
          <RunType type={detail.run_type} />
        </dd>
        <dt>{t.businessDate}</dt>
        <dd data-testid="business-date">
          <Time iso={detail.schedule_time} />
        </dd>
        <dt>{t.started}</dt>
        <dd>
          <Time iso={detail.start_time} />
        </dd>
        <dt>{t.duration}</dt>
        <dd>{formatDuration(detail.duration_ms)}</dd>
        <dt>{t.master}</dt>
        <dd>{detail.host ?? "—"}</dd>
        {detail.parent_instance_id ? (
          <>
            <dt>{t.parent}</dt>
            <dd>
              <Link to={`/instances/${detail.parent_instance_id}`}>
                {t.parentLink(detail.parent_instance_id)}
              </Link>
            </dd>
          </>
        ) : null}
        <dt>{t.tasks}</dt>
        <dd data-testid="tasks-finished">
          {t.finished(count.done, detail.tasks_total)}
          {count.skipped ? t.skipped(count.skipped) : ""}
        </dd>
      </dl>
      <RunWaiting answer={answer} />
      <ErrorBox error={version.error} title={t.cannotLoadGraph} />
      {graph && (
        <DagView
          layoutKey={layoutKeyOf(detail.workflow_code, detail.workflow_version)}
          graph={graph}
          states={states}
          waiting={whyText}
          selected={selected}
          onSelect={setSelected}
          labels={labels}
        />
      )}
      {chosen && (
        <div className="selection" data-testid="selected-task">
          <strong>{chosen.name}</strong> <StateBadge state={chosen.state} />{" "}
          {t.attempt(chosen.attempt, chosen.host ?? "—")}{" "}
          {chosen.id !== null && <Link to={`/tasks/${chosen.id}/log`}>{t.openLog}</Link>}{" "}
          {chosen.sub_instance_id && (
            <Link to={`/instances/${chosen.sub_instance_id}`}>{t.openSub(chosen.sub_instance_id)}</Link>
          )}
          {chosenWhy && (
            <div data-testid="selected-why">
              {tWaiting.heading} <WhyWaiting wait={chosenWhy} />
            </div>
          )}
          <RenderedScript
            key={chosen.id}
            taskId={chosen.id}
            started={Boolean(chosen.start_time) && !LOGIC_TYPES.has(chosen.type)}
          />
        </div>
      )}
      <TaskTable tasks={detail.tasks} selected={selected} onSelect={setSelected} why={why} />
    </section>
  );
}
