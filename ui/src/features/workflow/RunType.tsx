import type { Instance } from "../../api/client";

/** How a run came to be (its command): the words shown, and what each means on hover. */
const TEXT: Record<Instance["run_type"], [string, string]> = {
  manual: ["manual", "started by hand"],
  scheduled: ["scheduled", "started by a schedule"],
  backfill: ["backfill", "one date of a backfill"],
  rerun: ["rerun", "run again from the start"],
  recovery: ["recovery", "recovered: from its failed tasks, a pause, or a failover"],
};

export function RunType({ type }: { type: Instance["run_type"] }) {
  const [label, hint] = TEXT[type];
  return (
    <span className={`runtype runtype-${type}`} title={hint} data-testid="run-type">
      {label}
    </span>
  );
}
