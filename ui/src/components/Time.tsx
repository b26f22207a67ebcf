import { formatTime, useDisplayZone } from "./time";

/** A time in the header's display zone, labelled with it; re-rendered when the zone is switched. */
export function Time({ iso }: { iso: string | null | undefined }) {
  const zone = useDisplayZone();
  return <time dateTime={iso ?? undefined}>{formatTime(iso, zone)}</time>;
}
