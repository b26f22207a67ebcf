// A date and time typed as YYYY-MM-DD HH:MM, 24-hour in every locale (the browser's datetime-local picker shows
// 12-hour with AM/PM in some), in the viewer's time zone; an unreadable one is marked at the field.
import { useId } from "react";

import { tDateTime } from "./strings";

const FORMAT = /^(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2})(?::(\d{2}))?$/;

/** "2026-11-01 23:30" (seconds optional, a T allowed) as a local time, or null when it is no real time. */
export function parseDateTime24(text: string): Date | null {
  const match = FORMAT.exec(text.trim());
  if (!match) return null;
  const [year, month, day, hour, minute, second] = match.slice(1).map((p) => Number(p ?? 0)) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  if (hour > 23 || minute > 59 || second > 59) return null;
  const date = new Date(year, month - 1, day, hour, minute, second);
  return date.getFullYear() === year && date.getMonth() === month - 1 && date.getDate() === day ? date : null;
}

export function DateTimeInput({
  label,
  value,
  onChange,
}: {
  label: string;
  value: string;
  onChange: (value: string) => void;
}) {
  const id = useId();
  const bad = value.trim() !== "" && parseDateTime24(value) === null;
  return (
    <label>
      {label}{" "}
      <input
        value={value}
        placeholder={tDateTime.placeholder}
        inputMode="numeric"
        aria-invalid={bad}
        aria-describedby={bad ? `${id}-error` : undefined}
        onChange={(e) => onChange(e.target.value)}
        required
      />
      {bad && (
        <span className="error-inline" id={`${id}-error`} role="alert">
          {tDateTime.bad(value.trim())}
        </span>
      )}
    </label>
  );
}
