// A task attempt's log, read in windows (never the whole file): a page of lines, a search on the worker, the
// download address. Its follow stream is in stream.ts (followLog).
import { api, baseUrl, call, type LogLines, type LogSearch } from "./client";

/** ``limit`` lines from line ``skip`` (``fromEnd``: the last page, whatever ``skip`` says). */
export function readLog(task: number, skip: number, limit: number, fromEnd = false): Promise<LogLines> {
  return call(
    api.GET("/api/v1/tasks/{id}/log", {
      params: { path: { id: String(task) }, query: { skip, limit, from_end: fromEnd } },
    }),
  );
}

/** Up to ``limit`` lines matching ``q`` (case-insensitive) from line ``after`` on, searched on the worker. */
export function searchLog(task: number, q: string, after: number, limit: number): Promise<LogSearch> {
  return call(
    api.GET("/api/v1/tasks/{id}/log/search", {
      params: { path: { id: String(task) }, query: { q, after, limit } },
    }),
  );
}

/** Where the whole log downloads from. */
export function logDownloadUrl(task: number): string {
  return `${baseUrl()}/api/v1/tasks/${task}/log/download`;
}
