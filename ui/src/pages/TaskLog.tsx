import { useVirtualizer } from "@tanstack/react-virtual";
import { useCallback, useEffect, useReducer, useRef, useState } from "react";
import { Link, useParams } from "react-router";

import { api, baseUrl, call, errorOf, token } from "../api/client";
import { useTask } from "../api/queries";
import { ErrorBox, Loading } from "../components/ErrorBox";
import { StateBadge } from "../components/StateBadge";
import { LogStore, PAGE } from "../features/logs/logStore";

const ROW = 18;

export function TaskLog() {
  const id = Number(useParams().id);
  const task = useTask(id);
  const store = useRef(new LogStore()).current;
  const [, redraw] = useReducer((n: number) => n + 1, 0);
  const [error, setError] = useState<unknown>(null);
  const [follow, setFollow] = useState(true);
  const [needle, setNeedle] = useState("");
  const [hits, setHits] = useState<number[]>([]);
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
      if (inflight.current.has(key)) return;
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
      } catch (exc) {
        setError(exc);
      } finally {
        inflight.current.delete(key);
      }
    },
    [id, store],
  );

  // open at the end (the last page, with the line count), then poll for new lines while the task writes
  useEffect(() => {
    let stop = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const tail = async (first: boolean) => {
      if (stop) return;
      const before = store.known;
      await fetchLines(store.known, PAGE, first);
      if (stop || store.complete) return;
      timer = setTimeout(() => void tail(false), store.known > before ? 0 : 1000);
    };
    void tail(true);
    return () => {
      stop = true;
      clearTimeout(timer);
    };
  }, [fetchLines, store]);

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

  const download = async () => {
    try {
      const response = await fetch(`${baseUrl()}/api/v1/tasks/${id}/log/download`, {
        headers: { Authorization: `Bearer ${token.get() ?? ""}` },
      });
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

  const find = (text: string) => {
    setNeedle(text);
    const found = store.search(text);
    setHits(found);
    setHit(0);
    if (found.length > 0) {
      setFollow(false);
      rows.scrollToIndex(found[0] as number, { align: "center" });
    }
  };
  const jump = (delta: number) => {
    if (hits.length === 0) return;
    const next = (hit + delta + hits.length) % hits.length;
    setHit(next);
    rows.scrollToIndex(hits[next] as number, { align: "center" });
  };

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
      <div className="toolbar">
        <label>
          <input type="checkbox" checked={follow} onChange={(e) => setFollow(e.target.checked)} /> Follow
        </label>
        <input
          type="search"
          placeholder="Search loaded lines (Enter: next)"
          aria-label="Search the log"
          value={needle}
          onChange={(e) => find(e.target.value)}
          onKeyDown={(e) => e.key === "Enter" && jump(e.shiftKey ? -1 : 1)}
        />
        <span className="muted">{needle ? `${hits.length ? hit + 1 : 0} / ${hits.length}` : ""}</span>
        <span className="spacer" />
        <span className="muted" data-testid="log-status">
          {store.known} lines{store.complete ? " (complete)" : " (task still writing)"}
        </span>
        <button onClick={() => void download()}>Download</button>
      </div>
      <ErrorBox error={error} title="Cannot read the log" />
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
            const isHit = hits[hit] === row.index;
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
