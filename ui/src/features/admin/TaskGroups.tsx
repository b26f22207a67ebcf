// Task groups: their size, slots in use and queue length; resize live; a group's queue with each waiting
// task's position (1 = next); an admin may force-start a waiting task (it takes its slots over the size).
import { useState, type FormEvent } from "react";
import { Link } from "react-router";

import {
  useCreateTaskGroup,
  useForceStart,
  useResizeTaskGroup,
  useTaskGroupQueue,
  useTaskGroups,
} from "../../api/admin";
import { ErrorBox } from "../../components/ErrorBox";
import { useAction } from "./useAction";

function Queue({ id }: { id: number }) {
  const queue = useTaskGroupQueue(id);
  const { run, error, busy } = useAction(["task-groups"]);
  const forcing = useForceStart();
  const force = (task: number) => run(() => forcing.mutateAsync(task));
  return (
    <div className="queue" data-testid={`queue-${id}`}>
      <ErrorBox error={error ?? queue.error} title="Queue" />
      <table className="grid">
        <thead>
          <tr>
            <th>Position</th>
            <th>Task</th>
            <th>Status</th>
            <th>Priority</th>
            <th>Slots</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {queue.data?.items.map((q, i) => (
            <tr key={q.task_instance_id ?? `hidden-${i}`}>
              <td>{q.position ?? "—"}</td>
              <td>
                {q.workflow_instance_id === null ? (
                  <em>a task of a project you do not see</em>
                ) : (
                  <Link to={`/instances/${q.workflow_instance_id}`}>{q.task}</Link>
                )}
              </td>
              <td>
                {q.status === "HOLDING" ? "● holding" : "○ waiting"}
                {q.forced ? " (forced)" : ""}
              </td>
              <td>{q.priority}</td>
              <td>{q.slots}</td>
              <td>
                {q.status === "WAITING" && q.task_instance_id !== null && (
                  <button disabled={busy} onClick={() => void force(q.task_instance_id as number)}>
                    Force start
                  </button>
                )}
              </td>
            </tr>
          ))}
          {queue.data?.items.length === 0 && (
            <tr>
              <td colSpan={6} className="muted">
                empty
              </td>
            </tr>
          )}
        </tbody>
      </table>
    </div>
  );
}

function Resize({ id, size }: { id: number; size: number }) {
  const [value, setValue] = useState(String(size));
  const { run, error, busy } = useAction(["task-groups"]);
  const resizing = useResizeTaskGroup(id);
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    await run(() => resizing.mutateAsync(Number(value)));
  };
  return (
    <form className="inline-form" onSubmit={submit}>
      <input
        type="number"
        min={0}
        aria-label={`Size of task group ${id}`}
        value={value}
        onChange={(e) => setValue(e.target.value)}
      />
      <button type="submit" disabled={busy || value === String(size) || value === ""}>
        Resize
      </button>
      <ErrorBox error={error} title="Not resized" />
    </form>
  );
}

export function TaskGroups() {
  const list = useTaskGroups();
  const creation = useCreateTaskGroup();
  const { run, error, busy } = useAction(["task-groups"]);
  const [name, setName] = useState("");
  const [size, setSize] = useState("1");
  const [open, setOpen] = useState<number | null>(null);
  const create = async (e: FormEvent) => {
    e.preventDefault();
    if (await run(() => creation.mutateAsync({ name, size: Number(size) }))) setName("");
  };
  return (
    <div data-testid="admin-task-groups">
      <h2>Task groups</h2>
      <form className="toolbar" onSubmit={create} aria-label="New task group">
        <input
          aria-label="Task group name"
          placeholder="name"
          value={name}
          onChange={(e) => setName(e.target.value)}
        />
        <input
          type="number"
          min={0}
          aria-label="Task group size"
          value={size}
          onChange={(e) => setSize(e.target.value)}
        />
        <button type="submit" disabled={busy || !name.trim()}>
          Create task group
        </button>
      </form>
      <ErrorBox error={error ?? list.error} title="Task groups" />
      <table className="grid">
        <thead>
          <tr>
            <th>Name</th>
            <th>Project</th>
            <th>In use / size</th>
            <th>Waiting</th>
            <th>Size</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {list.data?.items.map((g) => (
            <tr key={g.id} data-testid={`task-group-${g.name}`}>
              <td>{g.name}</td>
              <td>{g.project ?? "any"}</td>
              <td>
                {g.used} / {g.size}
              </td>
              <td>{g.waiting}</td>
              <td>
                <Resize id={g.id as number} size={g.size as number} />
              </td>
              <td>
                <button
                  aria-expanded={open === g.id}
                  onClick={() => setOpen(open === g.id ? null : (g.id as number))}
                >
                  Queue
                </button>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {open !== null && <Queue id={open} />}
    </div>
  );
}
