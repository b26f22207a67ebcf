// The live streams: a server-sent-events reader over fetch (EventSource cannot send the Authorization header),
// the page's event stream (state changes, /api/v1/events) and a task log's follow (/api/v1/tasks/{id}/log/follow).
import { authHeaders, baseUrl } from "./client";

export interface SseEvent {
  event: string;
  id: string | null;
  data: string;
}

/** Split complete events off ``buffer`` (text so far); ``rest`` is the unfinished tail to keep. */
export function parseSse(buffer: string): { events: SseEvent[]; rest: string } {
  const events: SseEvent[] = [];
  const text = buffer.replace(/\r\n?/g, "\n");
  const blocks = text.split("\n\n");
  const rest = blocks.pop() ?? "";
  for (const block of blocks) {
    let event = "message";
    let id: string | null = null;
    const data: string[] = [];
    for (const line of block.split("\n")) {
      if (line === "" || line.startsWith(":")) continue;
      const colon = line.indexOf(":");
      const name = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? "" : line.slice(colon + 1);
      if (value.startsWith(" ")) value = value.slice(1);
      if (name === "event") event = value;
      else if (name === "id") id = value;
      else if (name === "data") data.push(value);
    }
    if (data.length > 0) events.push({ event, id, data: data.join("\n") });
  }
  return { events, rest };
}

export interface StreamOptions {
  /** a function when each reconnection asks from a new place */
  url: string | (() => string);
  headers: () => Record<string, string>;
  onEvent: (event: SseEvent) => void;
  onStatus: (connected: boolean) => void;
  /** a 401: stop, do not retry */
  onUnauthorized: () => void;
}

/** One live stream: reconnects with backoff and resumes from the last event id. ``close()`` ends it. */
export function openStream(options: StreamOptions): { close: () => void } {
  let lastId: string | null = null;
  let closed = false;
  let controller: AbortController | null = null;
  let delay = 250;
  let timer: ReturnType<typeof setTimeout> | undefined;

  const run = async (): Promise<void> => {
    controller = new AbortController();
    try {
      const headers: Record<string, string> = { Accept: "text/event-stream", ...options.headers() };
      if (lastId) headers["Last-Event-ID"] = lastId;
      const url = typeof options.url === "string" ? options.url : options.url();
      const response = await fetch(url, { headers, signal: controller.signal, cache: "no-store" });
      if (response.status === 401) {
        options.onUnauthorized();
        return;
      }
      if (!response.ok || !response.body) throw new Error(`stream answered ${response.status}`);
      options.onStatus(true);
      delay = 250;
      const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        const parsed = parseSse(buffer + value);
        buffer = parsed.rest;
        for (const event of parsed.events) {
          if (event.id) lastId = event.id;
          options.onEvent(event);
        }
      }
    } catch {
      // network error or abort: fall through to the retry below
    }
    if (closed) return;
    options.onStatus(false);
    timer = setTimeout(() => void run(), delay);
    delay = Math.min(delay * 2, 5000);
  };
  void run();
  return {
    close: () => {
      closed = true;
      clearTimeout(timer);
      controller?.abort();
    },
  };
}

/** What a stream's owner hears: its events, its connection state, a 401 (the stream stops). */
export type StreamHandlers = Omit<StreamOptions, "url" | "headers">;

/** The page's live stream of state changes (of one instance, or of every instance the caller sees). */
export function openEvents(instance: number | undefined, handlers: StreamHandlers): { close: () => void } {
  const query = instance === undefined ? "" : `?instance=${instance}`;
  return openStream({ url: `${baseUrl()}/api/v1/events${query}`, headers: () => authHeaders(), ...handlers });
}

/** What a task log's follow stream sends: ``lines`` from ``start``; ``end`` at ``next`` (``complete``: the task
 * finished); ``error`` with its ``message``. */
export interface FollowData {
  start?: number;
  lines?: string[];
  total?: number;
  next?: number;
  complete?: boolean;
  message?: string;
}

/** Follow a task attempt's log from line ``from()`` (asked again at each reconnection: from where it is). */
export function followLog(
  task: number,
  from: () => number,
  handlers: Omit<StreamHandlers, "onEvent"> & { onEvent: (event: string, data: FollowData) => void },
): { close: () => void } {
  return openStream({
    url: () => `${baseUrl()}/api/v1/tasks/${task}/log/follow?skip=${from()}`,
    headers: () => authHeaders(),
    ...handlers,
    onEvent: (e) => handlers.onEvent(e.event, JSON.parse(e.data) as FollowData),
  });
}
