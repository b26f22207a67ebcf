// An alert's delivery state, from its ``log`` (JSON text: ``delivered`` sender ids, ``errors`` name -> the
// receiver's answer): one line per sender. Pure functions.

export const STATUSES = [
  "WAIT_EXECUTION",
  "EXECUTION_SUCCESS",
  "EXECUTION_FAILURE",
  "EXECUTION_PARTIAL_SUCCESS",
] as const;
export type Status = (typeof STATUSES)[number];

export function statusOf(text: string | null): Status | undefined {
  return STATUSES.find((s) => s === text);
}

export interface DeliveryLog {
  delivered: number[];
  errors: Record<string, string>;
  note?: string;
}

export function parseLog(raw: unknown): DeliveryLog {
  let value: unknown = raw;
  if (typeof raw === "string") {
    try {
      value = JSON.parse(raw);
    } catch {
      value = null;
    }
  }
  const obj = (value && typeof value === "object" ? value : {}) as Record<string, unknown>;
  const delivered = Array.isArray(obj.delivered)
    ? obj.delivered.filter((x): x is number => typeof x === "number")
    : [];
  const errors: Record<string, string> = {};
  if (obj.errors && typeof obj.errors === "object")
    for (const [k, v] of Object.entries(obj.errors as Record<string, unknown>)) errors[k] = String(v);
  const out: DeliveryLog = { delivered, errors };
  if (typeof obj.note === "string") out.note = obj.note;
  return out;
}

export interface Outcome {
  sender: string;
  delivered: boolean;
  reason?: string;
}

/** Each sender's outcome: delivered ones named from ``names`` (sender id -> name) when known, failed ones with
 * the receiver's answer. */
export function outcomes(
  log: DeliveryLog,
  names: Map<number, string>,
  unnamed: (id: number) => string,
): Outcome[] {
  const out: Outcome[] = log.delivered.map((id) => ({
    sender: names.get(id) ?? unnamed(id),
    delivered: true,
  }));
  for (const [sender, reason] of Object.entries(log.errors)) out.push({ sender, delivered: false, reason });
  return out;
}
