import { useQueryClient } from "@tanstack/react-query";
import { useMemo, useState } from "react";
import { Link, useNavigate, useParams } from "react-router";

import { api, call } from "../api/client";
import { useVersions, useWorkflow, workflowAction, type WorkflowAction } from "../api/queries";
import { ErrorBox, Loading } from "../components/ErrorBox";
import { formatTime } from "../components/time";
import { buildGraph, type TaskSpec } from "../features/graph/buildGraph";
import { DagView } from "../features/graph/DagView";

export function WorkflowPage() {
  const code = Number(useParams().code);
  const query = useWorkflow(code);
  const versions = useVersions(code);
  const client = useQueryClient();
  const navigate = useNavigate();
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const detail = query.data;
  const graph = useMemo(() => (detail ? buildGraph(detail.document.tasks as TaskSpec[]) : null), [detail]);

  const act = async (what: WorkflowAction) => {
    setBusy(true);
    setError(null);
    try {
      const result = await workflowAction(code, what);
      void client.invalidateQueries({ queryKey: ["workflow", code] });
      if (what === "start") {
        const commandId = (result as { command_id: number }).command_id;
        // the master turns the command into an instance within moments: follow it there
        for (let i = 0; i < 50; i += 1) {
          const status = await call(
            api.GET("/api/v1/commands/{id}", { params: { path: { id: String(commandId) } } }),
          );
          if (status.workflow_instance_id) return navigate(`/instances/${status.workflow_instance_id}`);
          if (status.status === "ERROR") throw new Error(status.message ?? "the command was refused");
          await new Promise((r) => setTimeout(r, 200));
        }
      }
    } catch (exc) {
      setError(exc);
    } finally {
      setBusy(false);
    }
  };

  if (query.isPending) return <Loading what={`workflow ${code}`} />;
  if (!detail) return <ErrorBox error={query.error} title={`Cannot load workflow ${code}`} />;
  return (
    <section>
      <div className="pagehead">
        <h1>
          {detail.name} <span className="muted">v{detail.version}</span>{" "}
          <span className={`release release-${detail.release_state}`}>
            {detail.release_state === "ONLINE" ? "● online" : "○ offline"}
          </span>
        </h1>
        <div className="actions" role="group" aria-label="Workflow actions">
          {detail.release_state === "ONLINE" ? (
            <button disabled={busy} onClick={() => void act("offline")}>
              Take offline
            </button>
          ) : (
            <button disabled={busy} onClick={() => void act("online")}>
              Put online
            </button>
          )}
          <button disabled={busy} onClick={() => void act("start")}>
            Start
          </button>
          <Link to={`/instances?workflow=${code}`}>Instances</Link>
        </div>
      </div>
      <ErrorBox error={error} title="Refused" />
      <p className="muted">
        Project {detail.project} · code {detail.code} · updated {formatTime(detail.update_time)}
        {detail.description ? ` · ${detail.description}` : ""}
      </p>
      {graph && graph.dangling.length > 0 && (
        <div className="error">Upstream tasks that do not exist: {graph.dangling.join(", ")}</div>
      )}
      {graph && <DagView layoutKey={`${code}:${detail.version}`} graph={graph} />}
      <h2>Versions</h2>
      <ErrorBox error={versions.error} title="Cannot list versions" />
      <ul className="versions">
        {versions.data?.items.map((v) => (
          <li key={String(v.version)}>
            v{String(v.version)} {v.current ? "(current)" : ""}{" "}
            <span className="muted">{formatTime(v.create_time)}</span>
          </li>
        ))}
      </ul>
    </section>
  );
}
