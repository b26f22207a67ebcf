// The answer of "send a test alert": each sender, sent or failed with the reason.
import { t } from "./strings";

export interface SenderOutcome {
  id?: number;
  name: string;
  type: string;
  sent: boolean;
  error?: string;
}

export function TestOutcome({ outcomes }: { outcomes: SenderOutcome[] }) {
  return (
    <ul className="test-outcome" aria-label={t.testResult}>
      {outcomes.map((o) => (
        <li key={`${o.name}-${o.type}`} data-testid={`outcome-${o.name}`}>
          {o.name} ({o.type}):{" "}
          {o.sent ? <strong className="ok">{t.sent}</strong> : <strong className="bad">{t.failed}</strong>}
          {!o.sent && o.error ? ` — ${o.error}` : ""}
        </li>
      ))}
    </ul>
  );
}
