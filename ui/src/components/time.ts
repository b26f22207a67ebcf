// Every time the UI shows goes through this module: formatted in the display zone the header's switch picks
// (UTC, the browser's own zone, or any IANA zone; kept in localStorage) and labelled with that zone.
import { useSyncExternalStore } from "react";

import { formatNumber, locale } from "../i18n";
import { tUnits } from "./strings";

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

// formatters are costly to make (a list re-renders often under live updates): one per zone, kept
const partsFormats = new Map<string, Intl.DateTimeFormat>();
const wallFormats = new Map<string, Intl.DateTimeFormat>();

function cached(cache: Map<string, Intl.DateTimeFormat>, zone: string, make: () => Intl.DateTimeFormat) {
  let format = cache.get(zone);
  if (!format) {
    format = make();
    cache.set(zone, format);
  }
  return format;
}

function wallParts(date: Date, zone: string): number[] {
  const format = cached(
    partsFormats,
    zone,
    () =>
      new Intl.DateTimeFormat("en-US", {
        timeZone: zone,
        hourCycle: "h23",
        year: "numeric",
        month: "numeric",
        day: "numeric",
        hour: "numeric",
        minute: "numeric",
        second: "numeric",
      }),
  );
  const parts = format.formatToParts(date);
  const part = (type: string) => Number(parts.find((p) => p.type === type)?.value ?? 0);
  return [part("year"), part("month"), part("day"), part("hour"), part("minute"), part("second")];
}

/** Minutes ``zone`` is ahead of UTC at ``date``. */
function offsetMinutes(date: Date, zone: string): number {
  const [y = 0, mo = 1, d = 1, h = 0, mi = 0] = wallParts(date, zone);
  const whole = Math.floor(date.getTime() / 60_000) * 60_000;
  return Math.round((Date.UTC(y, mo - 1, d, h, mi) - whole) / 60_000);
}

/** The zone's offset from UTC at ``date``: "UTC", "UTC+8", "UTC+5:30", "UTC−4". */
export function offsetLabel(date: Date, zone: string): string {
  const minutes = offsetMinutes(date, zone);
  if (minutes === 0) return zone === "UTC" || zone === "Etc/UTC" ? "UTC" : "UTC+0";
  const sign = minutes > 0 ? "+" : "−";
  const abs = Math.abs(minutes);
  const rest = abs % 60;
  return `UTC${sign}${Math.floor(abs / 60)}${rest ? `:${String(rest).padStart(2, "0")}` : ""}`;
}

const TYPED = /^(\d{4})-(\d{2})-(\d{2})(?:[ T](\d{1,2}):(\d{2})(?::(\d{2}))?)?$/;

/** A wall-clock time typed as "YYYY-MM-DD[ HH:mm[:ss]]" in the display zone, as an ISO instant (UTC), or
 * null when it is not one (a month 13, a 25th hour…). */
export function parseInZone(text: string, zone: DisplayZone = current): string | null {
  const m = TYPED.exec(text.trim());
  if (!m) return null;
  const [y, mo, d, h, mi, s] = m.slice(1).map((v) => Number(v ?? 0)) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  const guess = Date.UTC(y, mo - 1, d, h, mi, s);
  const back = new Date(guess);
  if (back.getUTCMonth() !== mo - 1 || back.getUTCDate() !== d || h > 23 || mi > 59 || s > 59) return null;
  const tz = resolveZone(zone);
  let at = guess - offsetMinutes(new Date(guess), tz) * 60_000;
  at = guess - offsetMinutes(new Date(at), tz) * 60_000; // the offset at the instant itself (summer time)
  return new Date(at).toISOString().replace(".000Z", "Z");
}

/** An ISO instant as "YYYY-MM-DD HH:mm" (":ss" when not zero) in the display zone: what parseInZone reads. */
export function typedInZone(iso: string, zone: DisplayZone = current): string {
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return iso;
  const [y = 0, mo = 1, d = 1, h = 0, mi = 0, s = 0] = wallParts(date, resolveZone(zone));
  const two = (n: number) => String(n).padStart(2, "0");
  return `${y}-${two(mo)}-${two(d)} ${two(h)}:${two(mi)}${s ? `:${two(s)}` : ""}`;
}

function wallClock(date: Date, zone: string): string {
  // h23: midnight is 00:00, never 24:00 (what hour12: false gives in some locales); the active language's
  // order of day, month and year
  const format = cached(
    wallFormats,
    `${locale()} ${zone}`,
    () =>
      new Intl.DateTimeFormat(locale(), {
        timeZone: zone,
        hourCycle: "h23",
        year: "numeric",
        month: "numeric",
        day: "numeric",
        hour: "2-digit",
        minute: "2-digit",
        second: "2-digit",
      }),
  );
  return format.format(date);
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
  if (ms < 1000) return tUnits.ms(formatNumber(ms));
  const s = ms / 1000;
  if (s < 60) return tUnits.s(formatNumber(s, 1));
  const m = Math.floor(s / 60);
  if (m < 60) return tUnits.minSec(m, Math.round(s % 60));
  return tUnits.hourMin(Math.floor(m / 60), m % 60);
}
