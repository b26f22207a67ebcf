import type { Instance } from "../../api/client";
import { translation } from "../../i18n";

/** How a run came to be (its command): the words shown, and what each means on hover. */
const TEXT: Record<Instance["run_type"], [string, string]> = {
  manual: ["manual", "started by hand"],
  scheduled: ["scheduled", "started by a schedule"],
  backfill: ["backfill", "one date of a backfill"],
  rerun: ["rerun", "run again from the start"],
  recovery: ["recovery", "recovered: from its failed tasks, a pause, or a failover"],
};
translation(TEXT, {
  manual: ["手动", "手动启动"],
  scheduled: ["调度", "由定时调度启动"],
  backfill: ["补数", "补数中的一个日期"],
  rerun: ["重跑", "从头重新运行"],
  recovery: ["恢复", "恢复运行：从失败的任务、暂停或容错处继续"],
});

/** A run type's word in the active language (for filters). */
export function runTypeLabel(type: Instance["run_type"]): string {
  return TEXT[type][0];
}

export function RunType({ type }: { type: Instance["run_type"] }) {
  const [label, hint] = TEXT[type];
  return (
    <span className={`runtype runtype-${type}`} title={hint} data-testid="run-type">
      {label}
    </span>
  );
}
