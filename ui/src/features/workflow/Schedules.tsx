// A workflow's schedules: the next fire times shown as you type the crontab (the server's own parser).
import { useEffect, useState } from "react";

import { useCronPreview, useReleaseSchedule, useSaveSchedule, useSchedules } from "../../api/workflows";
import { ErrorBox } from "../../components/ErrorBox";
import { FireTimes, NextFire } from "./FireTimes";

function usePreview(crontab: string, timezone: string) {
  const [debounced, setDebounced] = useState({ crontab, timezone });
  useEffect(() => {
    const timer = setTimeout(() => setDebounced({ crontab, timezone }), 250);
    return () => clearTimeout(timer);
  }, [crontab, timezone]);
  return useCronPreview(debounced.crontab, debounced.timezone);
}

/** ``lacking``: why the caller may not change schedules (no WRITE on the project), or null. */
export function Schedules({ code, lacking }: { code: number; lacking: string | null }) {
  const list = useSchedules(code);
  const saving = useSaveSchedule(code);
  const releasing = useReleaseSchedule(code);
  const [editing, setEditing] = useState<number | "new" | null>(null);
  const [crontab, setCrontab] = useState("0 2 * * *");
  const [timezone, setTimezone] = useState("UTC");
  const [error, setError] = useState<unknown>(null);
  const preview = usePreview(editing === null ? "" : crontab, timezone);

  const act = async (work: () => Promise<unknown>) => {
    setError(null);
    try {
      await work();
      setEditing(null);
    } catch (exc) {
      setError(exc);
    }
  };
  const save = () => act(() => saving.mutateAsync({ id: editing as number | "new", crontab, timezone }));
  const release = (id: number, online: boolean) => act(() => releasing.mutateAsync({ id, online }));

  return (
    <div data-testid="schedules">
      <h2>
        Schedules{" "}
        <button
          disabled={lacking !== null}
          title={lacking ?? ""}
          onClick={() => {
            setEditing("new");
            setCrontab("0 2 * * *");
            setTimezone("UTC");
          }}
        >
          New schedule
        </button>
      </h2>
      <ErrorBox error={list.error} title="Cannot list schedules" />
      <ErrorBox error={error} title="Refused" />
      <table className="grid">
        <thead>
          <tr>
            <th>Crontab</th>
            <th>Zone</th>
            <th>State</th>
            <th>Next fire</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {list.data?.items.map((s) => (
            <tr key={String(s.id)}>
              <td>
                <code>{s.crontab}</code>
              </td>
              <td>{s.timezone}</td>
              <td>{s.release_state === "ONLINE" ? "● online" : "○ offline"}</td>
              <td data-testid={`next-fire-${s.id}`}>
                <NextFire iso={s.next_fire_times?.[0]} zone={s.timezone ?? "UTC"} />
              </td>
              <td className="actions">
                <button
                  disabled={lacking !== null}
                  title={lacking ?? ""}
                  onClick={() => {
                    setEditing(s.id as number);
                    setCrontab(s.crontab ?? "");
                    setTimezone(s.timezone ?? "UTC");
                  }}
                >
                  Edit
                </button>
                <button
                  disabled={lacking !== null}
                  title={lacking ?? ""}
                  onClick={() => void release(s.id as number, s.release_state !== "ONLINE")}
                >
                  {s.release_state === "ONLINE" ? "Offline" : "Online"}
                </button>
              </td>
            </tr>
          ))}
          {list.data?.items.length === 0 && (
            <tr>
              <td colSpan={5} className="muted">
                no schedule
              </td>
            </tr>
          )}
        </tbody>
      </table>
      {editing !== null && (
        <form
          className="dialog"
          aria-label="Schedule"
          onSubmit={(e) => {
            e.preventDefault();
            void save();
          }}
        >
          <label>
            Crontab (5 fields, or Quartz with seconds){" "}
            <input value={crontab} onChange={(e) => setCrontab(e.target.value)} aria-label="Crontab" />
          </label>
          <label>
            Time zone{" "}
            <input value={timezone} onChange={(e) => setTimezone(e.target.value)} aria-label="Time zone" />
          </label>
          <div data-testid="next-fires">
            {preview.error ? (
              <ErrorBox error={preview.error} title="Not a valid schedule" />
            ) : (
              preview.data && (
                <FireTimes times={preview.data.next_fire_times ?? []} zone={preview.data.timezone ?? "UTC"} />
              )
            )}
          </div>
          <div className="actions">
            <button type="submit">Save</button>
            <button type="button" onClick={() => setEditing(null)}>
              Cancel
            </button>
          </div>
        </form>
      )}
    </div>
  );
}
