import { useVirtualizer } from "@tanstack/react-virtual";
import { useCallback, useEffect, useReducer, useRef, useState } from "react";
import { Link, useParams } from "react-router";

import { api, authHeaders, baseUrl, call, errorOf, token, type LogSearch } from "../api/client";
import { useAttempts, useTask } from "../api/queries";
import { BadAddress, idParam } from "../components/BadAddress";
import { ErrorBox, Loading } from "../components/ErrorBox";
import { StateBadge } from "../components/StateBadge";
import { signOut } from "../app/session";
import { openStream } from "../features/live/sse";
import { LogStore, PAGE } from "../features/logs/logStore";
import { tTitle } from "../components/strings";
import { useTitle } from "../components/title";

const ROW = 18;
const TEXT = {
  attempts: "Attempts",
  attempt: (n: number) => `Attempt ${n}`,
  app: "Application",
  appUi: "open its UI",
  lines: (n: number) => `${n} line${n === 1 ? "" : "s"}`,
  complete: " (complete)",
  writing: " (task still writing)",
  noLog: "no log",
};

interface FollowData {
  start?: number;
  lines?: string[];
  total?: number;
  next?: number;
  complete?: boolean;
  message?: string;
}
type SearchPage = LogSearch;

export function TaskLog() {
  const param = useParams().id;
  const id = idParam(param);
  if (id === null) return <BadAddress what="task" value={param} />;
  // a fresh page per attempt (the attempt tabs change only the id): no lines of another attempt kept
  return <TaskLogOf key={id} id={id} />;
}

function TaskLogOf({ id }: { id: number }) {
  const task = useTask(id);
  useTitle(tTitle.taskLog(id), task.data?.name);
  const store = useRef(new LogStore()).current;
  const [, redraw] = useReducer((n: number) => n + 1, 0);
  const [error, setError] = useState<unknown>(null);
  const [follow, setFollow] = useState(true);
  const [needle, setNeedle] = useState("");
  const [found, setFound] = useState<SearchPage | null>(null);
  const [hit, setHit] = useState(0);
  const inflight = useRef(new Set<string>());
  const scroller = useRef<HTMLDivElement>(null);

  const rows = useVirtualizer({
    count: store.known,
    getScrollElement: () => scroller.current,
    estimateSize: () => ROW,
    overscan: 30,
  });

  const fetchLines = useCallback(
    async (skip: number, limit: number, fromEnd = false) => {
      const key = `${skip}:${limit}:${fromEnd}`;
      if (inflight.current.has(key)) return true;
      inflight.current.add(key);
      try {
        const page = await call(
          api.GET("/api/v1/tasks/{id}/log", {
            params: { path: { id: String(id) }, query: { skip, limit, from_end: fromEnd } },
          }),
        );
        store.put(page.start, page.lines, page.next, page.complete, page.total);
        setError(null);
        redraw();
        return true;
      } catch (exc) {
        setError(exc);
        return false;
      } finally {
        inflight.current.delete(key);
      }
    },
    [id, store],
  );

  // open at the end (the last page, with the line count), then follow the new lines while the task writes
  // (one server-sent-events stream from where the log is known to end; it reconnects from there)
  useEffect(() => {
    let stop = false;
    let stream: { close: () => void } | null = null;
    void (async () => {
      // no log to read (none written yet, or gone): say so once rather than follow a 404 again and again
      const read = await fetchLines(0, PAGE, true);
      if (!read || stop || store.complete) return;
      stream = openStream({
        url: () => `${baseUrl()}/api/v1/tasks/${id}/log/follow?skip=${store.known}`,
        headers: () => authHeaders(),
        onEvent: (e) => {
          const data = JSON.parse(e.data) as FollowData;
          if (e.event === "lines" && data.lines && data.start !== undefined) {
            store.put(data.start, data.lines, data.start + data.lines.length, false, data.total);
          } else if (e.event === "end" && data.next !== undefined) {
            store.put(data.next, [], data.next, Boolean(data.complete));
            if (data.complete) stream?.close();
          } else if (e.event === "error") setError(new Error(data.message ?? "the log cannot be read"));
          redraw();
        },
        onStatus: () => {},
        onUnauthorized: () => void signOut(),
      });
    })();
    return () => {
      stop = true;
      stream?.close();
    };
  }, [fetchLines, store, id]);

  // the lines in view (after a jump or a scroll back to evicted pages)
  const items = rows.getVirtualItems();
  const first = items[0]?.index ?? 0;
  const last = items[items.length - 1]?.index ?? 0;
  useEffect(() => {
    for (const range of store.missing(first, last)) void fetchLines(range.skip, range.limit);
    store.evict((first + last) / 2);
  }, [first, last, store, fetchLines, store.known]);

  useEffect(() => {
    if (follow && store.known > 0) rows.scrollToIndex(store.known - 1, { align: "end" });
  }, [follow, store.known, rows]);

  // With a session cookie the download is a plain link: the browser streams the file to disk (nothing is held
  // in the page). An API token is not sent by a link, so a token sign-in fetches it into the page instead.
  const downloadUrl = `${baseUrl()}/api/v1/tasks/${id}/log/download`;
  const download = async () => {
    try {
      const response = await fetch(downloadUrl, { headers: authHeaders() });
      if (!response.ok) throw errorOf(response.status, await response.json().catch(() => undefined));
      const url = URL.createObjectURL(await response.blob());
      const a = document.createElement("a");
      a.href = url;
      a.download = `task-${id}.log`;
      a.click();
      URL.revokeObjectURL(url);
    } catch (exc) {
      setError(exc);
    }
  };

  // search on the worker (the whole log, not just the lines held here), 100 matches at a time
  const search = async (more: boolean) => {
    if (!needle) return setFound(null);
    try {
      const after = more && found ? found.next : 0;
      const page = await call(
        api.GET("/api/v1/tasks/{id}/log/search", {
          params: { path: { id: String(id) }, query: { q: needle, after, limit: 100 } },
        }),
      );
      const hits = more && found ? [...found.hits, ...page.hits] : page.hits;
      setFound({ ...page, hits });
      setError(null);
      if (!more && hits[0]) goTo(0, hits[0].line);
    } catch (exc) {
      setError(exc);
    }
  };
  const goTo = (index: number, line: number) => {
    setFollow(false);
    setHit(index);
    rows.scrollToIndex(line, { align: "center" });
  };
  const hits = found?.hits ?? [];

  const t = task.data;
  return (
    <section className="logpage">
      <div className="pagehead">
        <h1>
          Log of task {t ? t.name : `#${id}`} {t && <StateBadge state={t.state} />}
        </h1>
        {t && (
          <Link to={`/instances/${t.workflow_instance_id}`}>back to instance #{t.workflow_instance_id}</Link>
        )}
      </div>
      <ErrorBox error={task.error} title="Cannot load the task" />
      {t && <AttemptTabs id={id} instance={t.workflow_instance_id} taskCode={t.task_code} />}
      {t?.app_id && (
        <p data-testid="task-app">
          {TEXT.app} <code>{t.app_id}</code>{" "}
          {t.app_link && (
            <a href={t.app_link} target="_blank" rel="noreferrer">
              {TEXT.appUi}
            </a>
          )}
        </p>
      )}
      <div className="toolbar">
        <label>
          <input type="checkbox" checked={follow} onChange={(e) => setFollow(e.target.checked)} /> Follow
        </label>
        <form
          role="search"
          onSubmit={(e) => {
            e.preventDefault();
            void search(false);
          }}
        >
          <input
            type="search"
            placeholder="Search the whole log (Enter)"
            aria-label="Search the log"
            value={needle}
            onChange={(e) => setNeedle(e.target.value)}
          />
        </form>
        {found && (
          <span className="muted" data-testid="search-status">
            {hits.length} match{hits.length === 1 ? "" : "es"}
            {found.done ? "" : ` in lines 1–${found.next}`}{" "}
            {!found.done && (
              <button className="link" onClick={() => void search(true)}>
                search on
              </button>
            )}
          </span>
        )}
        <span className="spacer" />
        <span className="muted" data-testid="log-status">
          {store.known === 0 && error
            ? TEXT.noLog
            : TEXT.lines(store.known) + (store.complete ? TEXT.complete : TEXT.writing)}
        </span>
        {token.get() === null ? (
          <a className="button" href={downloadUrl} download data-testid="log-download">
            Download
          </a>
        ) : (
          <button onClick={() => void download()} title="signed in with a token: fetched into the page first">
            Download
          </button>
        )}
      </div>
      <ErrorBox error={error} title="Cannot read the log" />
      {hits.length > 0 && (
        <ol className="hits" aria-label="Matches" data-testid="search-hits">
          {hits.map((h, i) => (
            <li key={h.line}>
              <button className={`link${i === hit ? " current" : ""}`} onClick={() => goTo(i, h.line)}>
                {h.line + 1}
              </button>{" "}
              <span>{h.text}</span>
            </li>
          ))}
        </ol>
      )}
      {store.known === 0 && !error && !store.complete && <Loading what="log" />}
      <div
        className="log"
        ref={scroller}
        data-testid="log"
        tabIndex={0}
        onWheel={() => setFollow(false)}
        role="log"
        aria-live="off"
      >
        <div style={{ height: rows.getTotalSize(), position: "relative" }}>
          {items.map((row) => {
            const text = store.line(row.index);
            const isHit = hits[hit]?.line === row.index;
            return (
              <div
                key={row.key}
                className={`logline${isHit ? " hit" : ""}`}
                style={{ transform: `translateY(${row.start}px)` }}
              >
                <span className="lineno">{row.index + 1}</span>
                <span>{text ?? "…"}</span>
              </div>
            );
          })}
        </div>
      </div>
    </section>
  );
}

/** One tab per attempt of this task in its instance (retries, failovers): every attempt's log is reachable. */
function AttemptTabs({ id, instance, taskCode }: { id: number; instance: number; taskCode: number }) {
  const attempts = useAttempts(instance).data?.tasks.filter((a) => a.task_code === taskCode && a.id !== null);
  if (!attempts || attempts.length < 2) return null;
  return (
    <nav className="tabs" aria-label={TEXT.attempts} data-testid="attempt-tabs">
      {[...attempts]
        .sort((a, b) => a.attempt - b.attempt || (a.id ?? 0) - (b.id ?? 0))
        .map((a) => (
          <Link
            key={a.id}
            to={`/tasks/${a.id}/log`}
            aria-current={a.id === id ? "page" : undefined}
            className={a.id === id ? "active" : ""}
          >
            {TEXT.attempt(a.attempt)} <StateBadge state={a.state} />
          </Link>
        ))}
    </nav>
  );
}
