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

const LABELS: Record<InstanceAction, string> = {
  stop: "Stop",
  pause: "Pause",
  resume: "Resume",
  "recover-failed": "Recover failed",
  rerun: "Rerun",
};
const TEXT = {
  notWhile: (state: string) => `not allowed while ${state}`,
  finished: (done: number, total: number) => `${done} of ${total} finished`,
  skipped: (n: number) => `, ${n} skipped`,
};

/** Task types the master runs itself: no log, no script. */
const LOGIC_TYPES = new Set(["SWITCH", "CONDITIONS", "SUB_PROCESS", "DEPENDENT"]);

export function InstancePage() {
  const param = useParams().id;
  const id = idParam(param);
  if (id === null) return <BadAddress what="instance" value={param} />;
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

  if (query.isPending) return <Loading what={`instance ${id}`} />;
  if (!detail) return <ErrorBox error={query.error} title={`Cannot load instance ${id}`} />;
  const allowed = allowedActions(detail.state);
  const mayExecute = lacking(me, detail.project_code, "EXECUTE");
  const count = finishedCount(detail.tasks);
  return (
    <section>
      <div className="pagehead">
        <h1>
          {detail.name} <StateBadge state={detail.state} />
        </h1>
        <div className="actions" role="group" aria-label="Instance actions">
          {(Object.keys(LABELS) as InstanceAction[]).map((a) => (
            <button
              key={a}
              disabled={!allowed.includes(a) || action.isPending || mayExecute !== null}
              title={mayExecute ?? (allowed.includes(a) ? "" : TEXT.notWhile(detail.state))}
              onClick={() => action.mutate({ id, action: a })}
            >
              {LABELS[a]}
            </button>
          ))}
        </div>
      </div>
      {mayExecute && (
        <p className="muted" data-testid="rights-note">
          {mayExecute}
        </p>
      )}
      <ErrorBox error={action.error} title="Action refused" />
      <ErrorBox error={query.error} title="Refresh failed" />
      <dl className="facts">
        <dt>Instance</dt>
        <dd>#{detail.id}</dd>
        <dt>Workflow</dt>
        <dd>
          <Link to={`/workflows/${detail.workflow_code}`}>
            {detail.workflow_code} v{detail.workflow_version}
          </Link>
        </dd>
        <dt>Run type</dt>
        <dd>
          <RunType type={detail.run_type} />
        </dd>
        <dt>Business date</dt>
        <dd data-testid="business-date">
          <Time iso={detail.schedule_time} />
        </dd>
        <dt>Started</dt>
        <dd>
          <Time iso={detail.start_time} />
        </dd>
        <dt>Duration</dt>
        <dd>{formatDuration(detail.duration_ms)}</dd>
        <dt>Master</dt>
        <dd>{detail.host ?? "—"}</dd>
        {detail.parent_instance_id ? (
          <>
            <dt>Parent</dt>
            <dd>
              <Link to={`/instances/${detail.parent_instance_id}`}>
                instance #{detail.parent_instance_id}
              </Link>
            </dd>
          </>
        ) : null}
        <dt>Tasks</dt>
        <dd data-testid="tasks-finished">
          {TEXT.finished(count.done, detail.tasks_total)}
          {count.skipped ? TEXT.skipped(count.skipped) : ""}
        </dd>
      </dl>
      <RunWaiting answer={answer} />
      <ErrorBox error={version.error} title="Cannot load the workflow's graph" />
      {graph && (
        <DagView
          layoutKey={`${detail.workflow_code}:${detail.workflow_version}`}
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
          <strong>{chosen.name}</strong> <StateBadge state={chosen.state} /> attempt {chosen.attempt} on{" "}
          {chosen.host ?? "—"} {chosen.id !== null && <Link to={`/tasks/${chosen.id}/log`}>open log</Link>}{" "}
          {chosen.sub_instance_id && (
            <Link to={`/instances/${chosen.sub_instance_id}`}>
              open sub-workflow #{chosen.sub_instance_id}
            </Link>
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
