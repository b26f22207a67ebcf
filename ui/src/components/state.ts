// How a state looks: a tone (colour) AND a symbol AND its name, so state is never told by colour alone.
import { tState } from "./strings";

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

export function toneOf(state: string): Tone {
  return TONES[state] ?? "wait";
}

export function symbolOf(state: string): string {
  return STATE_SYMBOLS[state] ?? SYMBOLS[toneOf(state)];
}

export function labelOf(state: string): string {
  return (tState as Record<string, string>)[state] ?? state.toLowerCase().replace(/_/g, " ");
}
