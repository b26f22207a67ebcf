// The task table with its Gantt column in the same virtualised rows: bars line up with their tasks at any
// size (DolphinScheduler's separate ECharts Gantt misaligns past ~30 tasks); zoom widens the time axis.
import { useVirtualizer } from "@tanstack/react-virtual";
import { useRef, useState } from "react";
import { Link } from "react-router";

import type { TaskInstance, TaskWait } from "../../api/client";
import { StateBadge } from "../../components/StateBadge";
import { toneOf } from "../../components/state";
import { formatDuration } from "../../components/time";
import { tWaiting } from "../instances/strings";
import { WhyWaiting } from "../instances/Waiting";
import { axisOf, barOf } from "./timeline";

const ROW = 30;
const COLUMNS = "240px 150px 40px 90px 50px 300px";
const FIXED = 240 + 150 + 40 + 90 + 50 + 300 + 6 * 8;

export function TaskTable({
  tasks,
  selected,
  onSelect,
  why,
}: {
  tasks: readonly TaskInstance[];
  selected: string | null;
  onSelect: (name: string) => void;
  /** each waiting task's reason, by task name (its master's answer) */
  why?: Map<string, TaskWait>;
}) {
  const [zoom, setZoom] = useState(1);
  const scroller = useRef<HTMLDivElement>(null);
  const rows = useVirtualizer({
    count: tasks.length,
    getScrollElement: () => scroller.current,
    estimateSize: () => ROW,
    overscan: 10,
  });
  const now = Date.now();
  const axis = axisOf(tasks, now);
  const width = 560 * zoom;
  const scale = axis ? width / (axis.end - axis.start) : 0;
  // one column template for the header and the rows: the bars stay aligned at every zoom
  const columns = { gridTemplateColumns: `${COLUMNS} ${width}px`, width: FIXED + width };

  return (
    <div className="tasktable">
      <div className="toolbar">
        <strong>{tasks.length} tasks</strong>
        <span className="spacer" />
        <label>
          Gantt zoom{" "}
          <input
            type="range"
            min={1}
            max={20}
            value={zoom}
            onChange={(e) => setZoom(Number(e.target.value))}
            aria-label="Gantt zoom"
          />
        </label>
        {axis && <span className="muted">span {formatDuration(axis.end - axis.start)}</span>}
      </div>
      <div className="tt-body" ref={scroller} data-testid="task-table" role="table" aria-label="Tasks">
        <div className="tt-head" role="row" style={columns}>
          <span role="columnheader">Task</span>
          <span role="columnheader">State</span>
          <span role="columnheader">Try</span>
          <span role="columnheader">Duration</span>
          <span role="columnheader">Log</span>
          <span role="columnheader">{tWaiting.column}</span>
          <span role="columnheader">Timeline (queued ░, running █)</span>
        </div>
        <div
          role="rowgroup"
          style={{ height: rows.getTotalSize(), position: "relative", width: FIXED + width }}
        >
          {rows.getVirtualItems().map((row) => {
            const t = tasks[row.index] as TaskInstance;
            const bar = axis ? barOf(t, axis, now) : null;
            const wait = why?.get(t.name);
            return (
              <div
                key={row.key}
                role="row"
                className={`tt-row${t.name === selected ? " selected" : ""}`}
                style={{ ...columns, transform: `translateY(${row.start}px)`, height: ROW }}
                data-testid={`task-${t.name}`}
                tabIndex={0}
                onClick={() => onSelect(t.name)}
                onKeyDown={(e) => e.key === "Enter" && onSelect(t.name)}
              >
                <span role="cell" className="tt-name" title={t.name}>
                  {t.name} <span className="muted">{t.type}</span>
                </span>
                <span role="cell">
                  <StateBadge state={t.state} />
                </span>
                <span role="cell">{t.attempt || "—"}</span>
                <span role="cell">{formatDuration(t.duration_ms)}</span>
                <span role="cell">
                  {t.sub_instance_id ? (
                    <Link to={`/instances/${t.sub_instance_id}`} title="open the sub-workflow instance">
                      child
                    </Link>
                  ) : t.id !== null ? (
                    <Link to={`/tasks/${t.id}/log`}>log</Link>
                  ) : (
                    "—"
                  )}
                </span>
                <span role="cell" className="tt-why">
                  {wait ? <WhyWaiting wait={wait} /> : ""}
                </span>
                <span role="cell" className="tt-bar">
                  {bar && bar.queuedFrom !== null && (
                    <i
                      className="bar-queued"
                      style={{
                        left: bar.queuedFrom * scale,
                        // a task still queued reaches "now", which may lie past the axis: clamp to it
                        width: Math.max(
                          1,
                          Math.min(
                            width - bar.queuedFrom * scale,
                            ((bar.runFrom ?? now - (axis?.start ?? 0)) - bar.queuedFrom) * scale,
                          ),
                        ),
                      }}
                    />
                  )}
                  {bar && bar.runFrom !== null && bar.runTo !== null && (
                    <i
                      className={`bar-run tone-${toneOf(t.state)}`}
                      style={{
                        left: bar.runFrom * scale,
                        width: Math.max(2, (bar.runTo - bar.runFrom) * scale),
                      }}
                      title={`${t.name}: ${formatDuration(bar.runTo - bar.runFrom)}`}
                    />
                  )}
                </span>
              </div>
            );
          })}
        </div>
      </div>
    </div>
  );
}
