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
};

const SYMBOLS: Record<Tone, string> = { ok: "✓", bad: "✕", run: "▶", wait: "○", hold: "■", off: "⊘" };

const LABELS: Record<string, string> = {
  RUNNING_EXECUTION: "running",
  SUBMITTED_SUCCESS: "submitted",
  FORCED_SUCCESS: "forced success",
  NEED_FAULT_TOLERANCE: "needs failover",
  DELAY_EXECUTION: "delayed",
  SERIAL_WAIT: "serial wait",
};

export function toneOf(state: string): Tone {
  return TONES[state] ?? "wait";
}

export function symbolOf(state: string): string {
  return SYMBOLS[toneOf(state)];
}

export function labelOf(state: string): string {
  return LABELS[state] ?? state.toLowerCase().replace(/_/g, " ");
}
