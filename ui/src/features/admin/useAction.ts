// One admin action at a time: run a call, keep its error (shown by the caller), refresh what it changed.
import { useQueryClient } from "@tanstack/react-query";
import { useCallback, useState } from "react";

export function useAction(refresh: readonly unknown[]) {
  const client = useQueryClient();
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const key = JSON.stringify(refresh);
  const run = useCallback(
    async (action: () => Promise<unknown>): Promise<boolean> => {
      setBusy(true);
      setError(null);
      try {
        await action();
        return true;
      } catch (exc) {
        setError(exc);
        return false;
      } finally {
        setBusy(false);
        void client.invalidateQueries({ queryKey: JSON.parse(key) as unknown[] });
      }
    },
    [client, key],
  );
  return { run, error, busy };
}
