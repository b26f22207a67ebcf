// Query and mutation hooks of a workflow's schedules and backfill: each mutation invalidates what it changes
// (a schedule: the workflow's schedules and the workflow list, which shows the schedule state).
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";

import { api, call } from "./client";

export function useSchedules(code: number) {
  return useQuery({
    queryKey: ["schedules", code],
    queryFn: () => call(api.GET("/api/v1/schedules", { params: { query: { workflow: code, size: 100 } } })),
  });
}

/** The next fire times of a crontab, by the server's own parser (a refusal is not retried). */
export function useCronPreview(crontab: string, timezone: string) {
  return useQuery({
    queryKey: ["cron-preview", { crontab, timezone }],
    enabled: crontab.trim() !== "",
    retry: false,
    queryFn: () =>
      call(
        api.POST("/api/v1/schedules/preview", { body: { crontab, timezone: timezone || "UTC", count: 5 } }),
      ),
  });
}

function useScheduleChange<V>(code: number, change: (value: V) => Promise<unknown>) {
  const client = useQueryClient();
  return useMutation({
    mutationFn: change,
    onSettled: () => {
      void client.invalidateQueries({ queryKey: ["schedules", code] });
      void client.invalidateQueries({ queryKey: ["workflows"] });
    },
  });
}

/** Create a schedule of workflow ``code`` (``id`` "new") or change one. */
export function useSaveSchedule(code: number) {
  return useScheduleChange(
    code,
    ({ id, crontab, timezone }: { id: number | "new"; crontab: string; timezone: string }) =>
      id === "new"
        ? call(api.POST("/api/v1/schedules", { body: { workflow_code: code, crontab, timezone } }))
        : call(
            api.PUT("/api/v1/schedules/{id}", {
              params: { path: { id: String(id) } },
              body: { crontab, timezone },
            }),
          ),
  );
}

/** Put a schedule online or offline. */
export function useReleaseSchedule(code: number) {
  return useScheduleChange(code, ({ id, online }: { id: number; online: boolean }) =>
    online
      ? call(api.POST("/api/v1/schedules/{id}/online", { params: { path: { id: String(id) } } }))
      : call(api.POST("/api/v1/schedules/{id}/offline", { params: { path: { id: String(id) } } })),
  );
}

type BackfillBody = { start: string; end: string; run_mode: "SERIAL" | "PARALLEL"; parallelism?: number };

/** Queue a backfill (COMPLEMENT_DATA) of workflow ``code``: its runs appear among the instances. */
export function useBackfill(code: number) {
  const client = useQueryClient();
  return useMutation({
    mutationFn: (body: BackfillBody) =>
      call(api.POST("/api/v1/workflows/{code}/backfill", { params: { path: { code: String(code) } }, body })),
    onSuccess: () => client.invalidateQueries({ queryKey: ["instances"] }),
  });
}
