// Every time the UI shows goes through this module: formatted in the display zone the header's switch picks
// (UTC, the browser's own zone, or any IANA zone; kept in localStorage) and labelled with that zone.
import { useSyncExternalStore } from "react";

/** ``"UTC"``, ``"local"`` (the browser's zone) or an IANA zone name. */
export type DisplayZone = string;

export const ZONE_KEY = "porpoise.displayZone";

/** The browser's own IANA zone. */
export function browserZone(): string {
  return Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
}

/** True when ``name`` is an IANA zone this browser knows. */
export function isZone(name: string): boolean {
  if (!name.trim()) return false;
  try {
    new Intl.DateTimeFormat("en-US", { timeZone: name });
    return true;
  } catch {
    return false;
  }
}

/** Every IANA zone the browser knows (for pickers), or none when it cannot list them. */
export function knownZones(): string[] {
  const intl = Intl as unknown as { supportedValuesOf?: (key: string) => string[] };
  try {
    return intl.supportedValuesOf ? intl.supportedValuesOf("timeZone") : [];
  } catch {
    return [];
  }
}

function stored(): DisplayZone {
  try {
    const value = globalThis.localStorage?.getItem(ZONE_KEY);
    if (value && (value === "local" || isZone(value))) return value;
  } catch {
    // storage refused (private mode): the default
  }
  return "local";
}

let current: DisplayZone = stored();
const listeners = new Set<() => void>();

export function displayZone(): DisplayZone {
  return current;
}

/** Switch every formatted time to ``zone`` and keep the choice for the next visit. */
export function setDisplayZone(zone: DisplayZone): void {
  current = zone;
  try {
    globalThis.localStorage?.setItem(ZONE_KEY, zone);
  } catch {
    // not kept: still applies to this tab
  }
  listeners.forEach((listener) => listener());
}

/** The display zone; the component re-renders when the header's switch changes it. */
export function useDisplayZone(): DisplayZone {
  return useSyncExternalStore(
    (listener) => {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    displayZone,
    displayZone,
  );
}

/** The IANA zone a display zone stands for. */
export function resolveZone(zone: DisplayZone): string {
  return zone === "local" ? browserZone() : zone;
}

/** The zone's offset from UTC at ``date``: "UTC", "UTC+8", "UTC+5:30", "UTC−4". */
export function offsetLabel(date: Date, zone: string): string {
  const parts = new Intl.DateTimeFormat("en-US", {
    timeZone: zone,
    hourCycle: "h23",
    year: "numeric",
    month: "numeric",
    day: "numeric",
    hour: "numeric",
    minute: "numeric",
  }).formatToParts(date);
  const part = (type: string) => Number(parts.find((p) => p.type === type)?.value ?? 0);
  const wall = Date.UTC(part("year"), part("month") - 1, part("day"), part("hour"), part("minute"));
  const whole = Math.floor(date.getTime() / 60_000) * 60_000;
  const minutes = Math.round((wall - whole) / 60_000);
  if (minutes === 0) return zone === "UTC" || zone === "Etc/UTC" ? "UTC" : "UTC+0";
  const sign = minutes > 0 ? "+" : "−";
  const abs = Math.abs(minutes);
  const rest = abs % 60;
  return `UTC${sign}${Math.floor(abs / 60)}${rest ? `:${String(rest).padStart(2, "0")}` : ""}`;
}

function wallClock(date: Date, zone: string): string {
  // h23: midnight is 00:00, never 24:00 (what hour12: false gives in some locales)
  return date.toLocaleString(undefined, { hourCycle: "h23", timeZone: zone });
}

/** ``iso`` in the display zone (the switch's, unless given), labelled with its offset: "…, 02:00:00 UTC+8". */
export function formatTime(iso: string | null | undefined, zone: DisplayZone = current): string {
  if (!iso) return "—";
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return iso;
  const tz = resolveZone(zone);
  return `${wallClock(date, tz)} ${offsetLabel(date, tz)}`;
}

/** ``iso`` in a named zone (a schedule's own), labelled with the zone's name: "…, 02:00:00 Asia/Shanghai". */
export function formatInZone(iso: string | null | undefined, zone: string): string {
  if (!iso) return "—";
  const date = new Date(iso);
  if (Number.isNaN(date.getTime()) || !isZone(zone)) return formatTime(iso, "UTC");
  return `${wallClock(date, zone)} ${zone}`;
}

export function formatDuration(ms: number | null | undefined): string {
  if (ms === null || ms === undefined) return "—";
  if (ms < 1000) return `${ms} ms`;
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(1)} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${Math.round(s % 60)}s`;
  return `${Math.floor(m / 60)}h ${m % 60}m`;
}
