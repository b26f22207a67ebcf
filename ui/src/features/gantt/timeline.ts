// Pure: task attempts -> bars on a time axis (queued part and running part), for the task table's Gantt.

export interface Attempt {
  submit_time?: string | null;
  start_time?: string | null;
  end_time?: string | null;
}

export interface Bar {
  /** offsets from the axis start, in ms; queued = submit..start, running = start..end (or now) */
  queuedFrom: number | null;
  runFrom: number | null;
  runTo: number | null;
}

export interface Axis {
  start: number;
  end: number;
}

const ms = (iso?: string | null): number | null => (iso ? Date.parse(iso) : null);

export function axisOf(attempts: readonly Attempt[], now: number): Axis | null {
  let start = Infinity;
  let end = -Infinity;
  for (const a of attempts) {
    const from = ms(a.submit_time) ?? ms(a.start_time);
    if (from === null) continue;
    start = Math.min(start, from);
    end = Math.max(end, ms(a.end_time) ?? now); // queued or running: up to now
  }
  if (start === Infinity) return null;
  return { start, end: Math.max(end, start + 1000) };
}

export function barOf(a: Attempt, axis: Axis, now: number): Bar {
  const submit = ms(a.submit_time);
  const start = ms(a.start_time);
  const end = ms(a.end_time) ?? (start !== null ? now : null);
  return {
    queuedFrom: submit !== null ? submit - axis.start : null,
    runFrom: start !== null ? start - axis.start : null,
    runTo: end !== null ? end - axis.start : null,
  };
}
