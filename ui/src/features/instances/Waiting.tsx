// "Why isn't it running?": each waiting task's reason in words, as its master gave it (engine/api/waiting.py),
// with times in the display zone; the run's own wait (a serial wait, a master that did not answer) above.
import { Link } from "react-router";

import type { TaskWait, Waiting } from "../../api/client";
import { Time } from "../../components/Time";
import { formatTime, type DisplayZone } from "../../components/time";
import { tWaiting } from "./strings";

/** One worker of a busy group, in words. */
function workerWords(w: TaskWait["workers"] extends (infer W)[] | undefined ? W : never): string {
  if (w.state === "draining") return tWaiting.draining(w.address);
  if (w.state === "overloaded") return tWaiting.overloaded(w.address, w.detail ?? "");
  return tWaiting.full(w.address, w.running ?? 0, w.slots ?? 0);
}

/** A task's reason as text; ``at`` renders a due time (a <Time>, or text for a tooltip). */
function words<T>(wait: TaskWait, at: (iso: string | null | undefined) => T): (string | T)[] {
  switch (wait.kind) {
    case "no_worker":
      return [tWaiting.noWorker(wait.worker_group ?? "")];
    case "workers_busy":
      return [
        tWaiting.workersBusy(wait.worker_group ?? ""),
        (wait.workers ?? []).map(workerWords).join("; "),
      ];
    case "task_group":
      return [
        tWaiting.taskGroup(
          wait.task_group ?? "",
          wait.position ?? 0,
          wait.queued ?? 0,
          wait.used ?? 0,
          wait.size ?? 0,
        ),
      ];
    case "retry":
      return [tWaiting.retry(wait.retry ?? 0, wait.retries ?? 0), at(wait.at)];
    case "delay":
      return [tWaiting.delay, at(wait.at)];
    case "dispatching":
      return [tWaiting.dispatching];
    case "dispatched":
      return [tWaiting.dispatched(wait.host ?? "")];
    case "logic":
      return wait.at
        ? [tWaiting.logic(wait.task_type ?? ""), tWaiting.nextCheck, at(wait.at)]
        : [tWaiting.logic(wait.task_type ?? "")];
    default:
      return [tWaiting.preparing];
  }
}

/** The reason as plain text (a DAG node's tooltip), times in ``zone``. */
export function waitText(wait: TaskWait, zone: DisplayZone): string {
  return words(wait, (iso) => formatTime(iso, zone)).join("");
}

/** The reason in words, its time a <Time> in the display zone. */
export function WhyWaiting({ wait }: { wait: TaskWait }) {
  return (
    <span className="why" data-testid={`why-${wait.task_name}`} data-kind={wait.kind}>
      {words(wait, (iso) => (
        <Time key="at" iso={iso} />
      ))}
    </span>
  );
}

/** The run's own wait and what the page could not learn: above the graph. */
export function RunWaiting({ answer }: { answer: Waiting | undefined }) {
  if (!answer) return null;
  const serial = answer.serial_wait;
  const host = answer.host ?? "";
  return (
    <>
      {answer.unknown_kind && (
        <p className="muted" role="status" data-testid="why-unknown">
          {tWaiting.unknown[answer.unknown_kind](host)}
        </p>
      )}
      {answer.state === "READY_PAUSE" && <p role="status">{tWaiting.pausing}</p>}
      {answer.state === "READY_STOP" && <p role="status">{tWaiting.stopping}</p>}
      {serial && (
        <div className="why-serial" role="status" data-testid="why-serial">
          {tWaiting.serialWait}
          {serial.behind.length === 0
            ? tWaiting.serialNone
            : serial.behind.map((r, i) => (
                <span key={r.id}>
                  {i > 0 && ", "}
                  <Link to={`/instances/${r.id}`}>{tWaiting.serialRun(r.id, r.name, r.state)}</Link>
                </span>
              ))}
          {tWaiting.serialPlace(serial.position, serial.waiting)}
          {serial.reason && <div className="muted">{tWaiting.serialReason(serial.reason)}</div>}
        </div>
      )}
    </>
  );
}

/** Each waiting task's reason by task name. */
export function byTask(answer: Waiting | undefined): Map<string, TaskWait> {
  return new Map((answer?.tasks ?? []).map((w) => [w.task_name, w]));
}
