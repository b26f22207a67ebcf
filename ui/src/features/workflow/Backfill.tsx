// Backfill (COMPLEMENT_DATA) over a date range, serially or in parallel chains.
import { useState, type FormEvent } from "react";

import { useBackfill } from "../../api/workflows";
import { DateTimeInput, parseDateTime24 } from "../../components/DateTimeInput";
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
  const backfill = useBackfill(code);
  // the range is typed in the header's display zone, and says which
  const zone = useDisplayZone();
  const label = offsetLabel(new Date(), resolveZone(zone));

  const submit = async (event: FormEvent) => {
    event.preventDefault();
    setError(null);
    // typed as 24-hour "YYYY-MM-DD HH:MM" (the field says when it is not), read in the display zone
    const from = parseDateTime24(start) && parseInZone(start, zone);
    const to = parseDateTime24(end) && parseInZone(end, zone);
    if (!from || !to) return;
    try {
      const result = await backfill.mutateAsync({
        start: from,
        end: to,
        run_mode: mode,
        ...(mode === "PARALLEL" ? { parallelism } : {}),
      });
      setDone(`${result.dates} dates queued in ${result.chains} chain(s)`);
    } catch (exc) {
      setError(exc);
    }
  };
  return (
    <form className="dialog" onSubmit={submit} aria-label="Backfill">
      <h2>Backfill</h2>
      <DateTimeInput label={tBackfillRange.from(label)} value={start} onChange={setStart} />
      <DateTimeInput label={tBackfillRange.to(label)} value={end} onChange={setEnd} />
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
