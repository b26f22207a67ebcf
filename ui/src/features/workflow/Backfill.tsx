// Backfill (COMPLEMENT_DATA) over a date range, serially or in parallel chains.
import { useState, type FormEvent } from "react";

import { useBackfill } from "../../api/workflows";
import { DateTimeInput, parseDateTime24 } from "../../components/DateTimeInput";
import { ErrorBox } from "../../components/ErrorBox";
import { offsetLabel, parseInZone, resolveZone, useDisplayZone } from "../../components/time";
import { tBackfill as t, tBackfillRange } from "./scheduleStrings";

const MODES = ["SERIAL", "PARALLEL"] as const;

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
      setDone(t.queued(result.dates as number, result.chains as number));
    } catch (exc) {
      setError(exc);
    }
  };
  return (
    <form className="dialog" onSubmit={submit} aria-label={t.title}>
      <h2>{t.title}</h2>
      <DateTimeInput label={tBackfillRange.from(label)} value={start} onChange={setStart} />
      <DateTimeInput label={tBackfillRange.to(label)} value={end} onChange={setEnd} />
      <label>
        {t.mode}{" "}
        <select value={mode} onChange={(e) => setMode(e.target.value as "SERIAL" | "PARALLEL")}>
          {MODES.map((m) => (
            <option key={m} value={m}>
              {t.modes[m]}
            </option>
          ))}
        </select>
      </label>
      {mode === "PARALLEL" && (
        <label>
          {t.chains}{" "}
          <input
            type="number"
            min={1}
            value={parallelism}
            onChange={(e) => setParallelism(Number(e.target.value))}
          />
        </label>
      )}
      <ErrorBox error={error} title={t.refused} />
      {done && <div className="notice">{done}</div>}
      <div className="actions">
        <button type="submit">{t.submit}</button>
        <button type="button" onClick={onClose}>
          {t.close}
        </button>
      </div>
    </form>
  );
}
