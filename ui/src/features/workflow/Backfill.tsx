// Backfill (COMPLEMENT_DATA) over a date range, serially or in parallel chains.
import { useState, type FormEvent } from "react";

import { api, call } from "../../api/client";
import { DateTimeInput, parseDateTime24 } from "../../components/DateTimeInput";
import { ErrorBox } from "../../components/ErrorBox";

export function Backfill({ code, onClose }: { code: number; onClose: () => void }) {
  const [start, setStart] = useState("");
  const [end, setEnd] = useState("");
  const [mode, setMode] = useState<"SERIAL" | "PARALLEL">("SERIAL");
  const [parallelism, setParallelism] = useState(2);
  const [error, setError] = useState<unknown>(null);
  const [done, setDone] = useState<string | null>(null);

  const submit = async (event: FormEvent) => {
    event.preventDefault();
    setError(null);
    const from = parseDateTime24(start);
    const to = parseDateTime24(end);
    if (!from || !to) return; // the field says why
    try {
      const result = await call(
        api.POST("/api/v1/workflows/{code}/backfill", {
          params: { path: { code: String(code) } },
          body: {
            start: from.toISOString(),
            end: to.toISOString(),
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
      <DateTimeInput label="From" value={start} onChange={setStart} />
      <DateTimeInput label="To" value={end} onChange={setEnd} />
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
