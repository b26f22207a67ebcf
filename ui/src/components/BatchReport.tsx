import type { BatchOutcome } from "./batch";
import { tCommon } from "./strings";

export function BatchReport({ outcome, what }: { outcome: BatchOutcome | null; what: string }) {
  if (!outcome) return null;
  return (
    <div className={outcome.failures.length ? "error" : "notice"} role="status" data-testid="batch-report">
      {tCommon.batchDone(outcome.done, what)}
      {outcome.failures.length > 0 && tCommon.batchRefused(outcome.failures.length)}
      {outcome.failures.length > 0 && (
        <ul>
          {outcome.failures.map((f) => (
            <li key={f.id}>
              #{f.id}: {f.message}
            </li>
          ))}
        </ul>
      )}
    </div>
  );
}
