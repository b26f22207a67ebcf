// How a state looks: a tone (colour) AND a symbol AND its name, so state is never told by colour alone.
export type Tone = "ok" | "bad" | "run" | "wait" | "hold" | "off";

const TONES: Record<string, Tone> = {
  SUCCESS: "ok",
  FORCED_SUCCESS: "ok",
  FAILURE: "bad",
  KILL: "bad",
  NEED_FAULT_TOLERANCE: "bad",
  RUNNING_EXECUTION: "run",
  DISPATCH: "run",
  READY_PAUSE: "run",
  READY_STOP: "run",
  READY_BLOCK: "run",
  SUBMITTED_SUCCESS: "wait",
  DELAY_EXECUTION: "wait",
  SERIAL_WAIT: "wait",
  PAUSE: "hold",
  STOP: "hold",
  BLOCK: "hold",
  DISABLED: "off",
  SKIPPED: "off",
};

const SYMBOLS: Record<Tone, string> = { ok: "✓", bad: "✕", run: "▶", wait: "○", hold: "■", off: "⊘" };
/** states sharing a tone but told apart by their symbol: a skipped branch is not a disabled task */
const STATE_SYMBOLS: Record<string, string> = { SKIPPED: "↷" };

const LABELS: Record<string, string> = {
  RUNNING_EXECUTION: "running",
  SUBMITTED_SUCCESS: "submitted",
  FORCED_SUCCESS: "forced success",
  NEED_FAULT_TOLERANCE: "needs failover",
  DELAY_EXECUTION: "delayed",
  SERIAL_WAIT: "serial wait",
  SKIPPED: "skipped",
};

export function toneOf(state: string): Tone {
  return TONES[state] ?? "wait";
}

export function symbolOf(state: string): string {
  return STATE_SYMBOLS[state] ?? SYMBOLS[toneOf(state)];
}

export function labelOf(state: string): string {
  return LABELS[state] ?? state.toLowerCase().replace(/_/g, " ");
}
