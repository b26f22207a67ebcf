// The start dialog: run options of POST /workflows/{code}/start, then follow the new instance.
import { useState, type FormEvent } from "react";
import { useNavigate } from "react-router";

import { api, call } from "../../api/client";
import { ErrorBox } from "../../components/ErrorBox";

type Priority = "HIGHEST" | "HIGH" | "MEDIUM" | "LOW" | "LOWEST";

/** Parse "a=1\nb=two" into parameter overrides; a line without "=" is an error naming it. */
export function parseParams(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  text.split("\n").forEach((raw, i) => {
    const line = raw.trim();
    if (!line) return;
    const eq = line.indexOf("=");
    if (eq <= 0) throw new Error(`parameters line ${i + 1}: expected name=value, got "${line}"`);
    out[line.slice(0, eq).trim()] = line.slice(eq + 1).trim();
  });
  return out;
}

export async function followCommand(commandId: number): Promise<number> {
  for (let i = 0; i < 100; i += 1) {
    const status = await call(
      api.GET("/api/v1/commands/{id}", { params: { path: { id: String(commandId) } } }),
    );
    if (status.workflow_instance_id) return status.workflow_instance_id;
    if (status.status === "ERROR") throw new Error(status.message ?? "the command was refused");
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`command ${commandId} is still queued: no master claimed it yet (is one running?)`);
}

export function StartDialog({ code, onClose }: { code: number; onClose: () => void }) {
  const navigate = useNavigate();
  const [params, setParams] = useState("");
  const [priority, setPriority] = useState<Priority>("MEDIUM");
  const [dryRun, setDryRun] = useState(false);
  const [startTasks, setStartTasks] = useState("");
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);

  const submit = async (event: FormEvent) => {
    event.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const tasks = startTasks
        .split(",")
        .map((t) => t.trim())
        .filter(Boolean);
      const started = await call(
        api.POST("/api/v1/workflows/{code}/start", {
          params: { path: { code: String(code) } },
          body: {
            params: parseParams(params),
            priority,
            dry_run: dryRun,
            ...(tasks.length ? { start_tasks: tasks } : {}),
          },
        }),
      );
      navigate(`/instances/${await followCommand(started.command_id)}`);
    } catch (exc) {
      setError(exc);
    } finally {
      setBusy(false);
    }
  };

  return (
    <form className="dialog" onSubmit={submit} aria-label="Start the workflow">
      <h2>Start</h2>
      <label>
        Parameters (name=value per line)
        <textarea rows={3} value={params} onChange={(e) => setParams(e.target.value)} />
      </label>
      <label>
        Priority{" "}
        <select value={priority} onChange={(e) => setPriority(e.target.value as Priority)}>
          {["HIGHEST", "HIGH", "MEDIUM", "LOW", "LOWEST"].map((p) => (
            <option key={p}>{p}</option>
          ))}
        </select>
      </label>
      <label>
        Only from tasks (comma list, optional){" "}
        <input value={startTasks} onChange={(e) => setStartTasks(e.target.value)} />
      </label>
      <label>
        <input type="checkbox" checked={dryRun} onChange={(e) => setDryRun(e.target.checked)} /> Dry run
      </label>
      <ErrorBox error={error} title="Not started" />
      <div className="actions">
        <button type="submit" disabled={busy}>
          Start now
        </button>
        <button type="button" onClick={onClose}>
          Cancel
        </button>
      </div>
    </form>
  );
}
