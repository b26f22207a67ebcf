import { useQueryClient } from "@tanstack/react-query";
import { useMemo, useState } from "react";
import { Link, useParams } from "react-router";

import { ApiError } from "../api/client";
import { useMe, useWorkflow, workflowAction, type WorkflowAction } from "../api/queries";
import { BadAddress, idParam } from "../components/BadAddress";
import { ErrorBox, Loading } from "../components/ErrorBox";
import { Time } from "../components/Time";
import { lacking } from "../features/access/rights";
import { buildGraph, type TaskSpec } from "../features/graph/buildGraph";
import { DagView } from "../features/graph/DagView";
import { Backfill } from "../features/workflow/Backfill";
import { Schedules } from "../features/workflow/Schedules";
import { StartDialog } from "../features/workflow/StartDialog";
import { tWorkflow } from "../features/workflow/strings";
import { VersionDiff } from "../features/workflow/VersionDiff";
import { tTitle } from "../components/strings";
import { useTitle } from "../components/title";

export function WorkflowPage() {
  const param = useParams().code;
  const code = idParam(param);
  if (code === null) return <BadAddress what="workflow" value={param} />;
  return <WorkflowOf key={code} code={code} />;
}

function WorkflowOf({ code }: { code: number }) {
  const query = useWorkflow(code);
  useTitle(tTitle.workflow(code), query.data?.name);
  const client = useQueryClient();
  const [error, setError] = useState<unknown>(null);
  const [dialog, setDialog] = useState<"start" | "backfill" | null>(null);
  const detail = query.data;
  const me = useMe().data;
  const graph = useMemo(() => (detail ? buildGraph(detail.document.tasks as TaskSpec[]) : null), [detail]);

  const release = async (what: WorkflowAction) => {
    setError(null);
    try {
      await workflowAction(code, what);
    } catch (exc) {
      setError(exc);
    } finally {
      void client.invalidateQueries({ queryKey: ["workflow", code] });
    }
  };

  if (query.isPending) return <Loading what={`workflow ${code}`} />;
  if (!detail) {
    if (query.error instanceof ApiError && query.error.status === 404) return <NoSuchWorkflow code={code} />;
    return <ErrorBox error={query.error} title={tWorkflow.cannotLoad(code)} />;
  }
  const online = detail.release_state === "ONLINE";
  const mayWrite = lacking(me, detail.project, "WRITE");
  const mayExecute = lacking(me, detail.project, "EXECUTE");
  return (
    <section>
      <div className="pagehead">
        <h1>
          {detail.name} <span className="muted">v{detail.version}</span>{" "}
          <span className={`release release-${detail.release_state}`}>
            {online ? "● online" : "○ offline"}
          </span>
        </h1>
        <div className="actions" role="group" aria-label="Workflow actions">
          <button
            disabled={mayWrite !== null}
            title={mayWrite ?? ""}
            onClick={() => void release(online ? "offline" : "online")}
          >
            {online ? "Take offline" : "Put online"}
          </button>
          <button
            disabled={!online || mayExecute !== null}
            title={mayExecute ?? (online ? "" : "put it online first")}
            onClick={() => setDialog("start")}
          >
            Start…
          </button>
          <button
            disabled={!online || mayExecute !== null}
            title={mayExecute ?? (online ? "" : "put it online first")}
            onClick={() => setDialog("backfill")}
          >
            Backfill…
          </button>
          {mayWrite === null ? (
            <Link to={`/workflows/${code}/edit`}>Edit</Link>
          ) : (
            <button disabled title={mayWrite}>
              Edit
            </button>
          )}
          <Link to={`/instances?workflow=${code}`}>Instances</Link>
        </div>
      </div>
      {(mayWrite ?? mayExecute) && (
        <p className="muted" data-testid="rights-note">
          {mayExecute ?? mayWrite}
          {mayExecute && mayWrite && mayWrite !== mayExecute ? `; ${mayWrite}` : ""}
        </p>
      )}
      <ErrorBox error={error} title="Refused" />
      {dialog === "start" && <StartDialog workflow={detail} onClose={() => setDialog(null)} />}
      {dialog === "backfill" && <Backfill code={code} onClose={() => setDialog(null)} />}
      <p className="muted">
        Project {detail.project} · code {detail.code} · updated <Time iso={detail.update_time} />
        {detail.description ? ` · ${detail.description}` : ""}
      </p>
      {graph && graph.dangling.length > 0 && (
        <div className="error">Upstream tasks that do not exist: {graph.dangling.join(", ")}</div>
      )}
      {graph && <DagView layoutKey={`${code}:${detail.version}`} graph={graph} />}
      <Schedules code={code} lacking={mayWrite} />
      <VersionDiff code={code} current={detail.version} />
    </section>
  );
}

function NoSuchWorkflow({ code }: { code: number }) {
  return (
    <section>
      <h1>{tWorkflow.noSuch}</h1>
      <p role="alert">{tWorkflow.noSuchCode(code)}</p>
      <Link to="/workflows">{tWorkflow.toList}</Link>
    </section>
  );
}
