import type { BatchOutcome } from "./batch";

export function BatchReport({ outcome, what }: { outcome: BatchOutcome | null; what: string }) {
  if (!outcome) return null;
  return (
    <div className={outcome.failures.length ? "error" : "notice"} role="status" data-testid="batch-report">
      {outcome.done} {what} done
      {outcome.failures.length > 0 && `, ${outcome.failures.length} refused:`}
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
