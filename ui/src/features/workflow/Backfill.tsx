// Backfill (COMPLEMENT_DATA) over a date range, serially or in parallel chains.
import { useState, type FormEvent } from "react";

import { api, call } from "../../api/client";
import { ErrorBox } from "../../components/ErrorBox";
import { offsetLabel, parseInZone, resolveZone, useDisplayZone } from "../../components/time";
import { tBackfillRange } from "./scheduleStrings";

export function Backfill({ code, onClose }: { code: number; onClose: () => void }) {
  const [start, setStart] = useState("");
  const [end, setEnd] = useState("");
  const [mode, setMode] = useState<"SERIAL" | "PARALLEL">("SERIAL");
  const [parallelism, setParallelism] = useState(2);
  const [error, setError] = useState<unknown>(null);
  const [done, setDone] = useState<string | null>(null);
  // the range is typed in the header's display zone, and says which
  const zone = useDisplayZone();
  const label = offsetLabel(new Date(), resolveZone(zone));

  const submit = async (event: FormEvent) => {
    event.preventDefault();
    setError(null);
    try {
      const result = await call(
        api.POST("/api/v1/workflows/{code}/backfill", {
          params: { path: { code: String(code) } },
          body: {
            start: parseInZone(start, zone) ?? start,
            end: parseInZone(end, zone) ?? end,
            run_mode: mode,
            ...(mode === "PARALLEL" ? { parallelism } : {}),
          },
        }),
      );
      setDone(`${result.dates} dates queued in ${result.chains} chain(s)`);
    } catch (exc) {
      setError(exc);
    }
  };
  return (
    <form className="dialog" onSubmit={submit} aria-label="Backfill">
      <h2>Backfill</h2>
      <label>
        {tBackfillRange.from(label)}{" "}
        <input type="datetime-local" value={start} onChange={(e) => setStart(e.target.value)} required />
      </label>
      <label>
        {tBackfillRange.to(label)}{" "}
        <input type="datetime-local" value={end} onChange={(e) => setEnd(e.target.value)} required />
      </label>
      <label>
        Mode{" "}
        <select value={mode} onChange={(e) => setMode(e.target.value as "SERIAL" | "PARALLEL")}>
          <option>SERIAL</option>
          <option>PARALLEL</option>
        </select>
      </label>
      {mode === "PARALLEL" && (
        <label>
          Chains at once{" "}
          <input
            type="number"
            min={1}
            value={parallelism}
            onChange={(e) => setParallelism(Number(e.target.value))}
          />
        </label>
      )}
      <ErrorBox error={error} title="Backfill refused" />
      {done && <div className="notice">{done}</div>}
      <div className="actions">
        <button type="submit">Queue backfill</button>
        <button type="button" onClick={onClose}>
          Close
        </button>
      </div>
    </form>
  );
}
