// Batch actions: run one call per selected item, report each failure with its reason.
export interface BatchOutcome {
  done: number;
  failures: { id: number | string; message: string }[];
}

export async function runBatch<T extends number | string>(
  ids: readonly T[],
  action: (id: T) => Promise<unknown>,
): Promise<BatchOutcome> {
  const results = await Promise.allSettled(ids.map((id) => action(id)));
  const failures: BatchOutcome["failures"] = [];
  results.forEach((r, i) => {
    if (r.status === "rejected") {
      failures.push({
        id: ids[i] as T,
        message: r.reason instanceof Error ? r.reason.message : String(r.reason),
      });
    }
  });
  return { done: results.length - failures.length, failures };
}
