// A schedule's fire times in its own zone (the crontab's wall clock) and in the viewer's display zone.
import { browserZone, formatInZone, formatTime, useDisplayZone } from "../../components/time";
import { tFires } from "./scheduleStrings";

function zoneName(zone: string): string {
  return zone === "local" ? browserZone() : zone;
}

/** The next fire times as a table: one row a time, the schedule's zone and the viewer's side by side. */
export function FireTimes({ times, zone }: { times: string[]; zone: string }) {
  const viewer = useDisplayZone();
  return (
    <table className="fires">
      <thead>
        <tr>
          <th>{tFires.inSchedule(zone)}</th>
          <th>{tFires.inViewer(zoneName(viewer))}</th>
        </tr>
      </thead>
      <tbody>
        {times.map((t) => (
          <tr key={t}>
            <td>{formatInZone(t, zone)}</td>
            <td>{formatTime(t, viewer)}</td>
          </tr>
        ))}
        {times.length === 0 && (
          <tr>
            <td colSpan={2} className="muted">
              {tFires.none}
            </td>
          </tr>
        )}
      </tbody>
    </table>
  );
}

/** One fire time: the schedule's wall clock with its zone, then the viewer's. */
export function NextFire({ iso, zone }: { iso: string | null | undefined; zone: string }) {
  const viewer = useDisplayZone();
  if (!iso) return <>—</>;
  return (
    <>
      {formatInZone(iso, zone)} <span className="muted">{tFires.viewer(formatTime(iso, viewer))}</span>
    </>
  );
}
