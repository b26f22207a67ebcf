// Alerts: every alert, newest first, with its delivery state per sender (delivered / failed with the
// receiver's answer), filtered by status and instance (kept in the URL); a finished alert can be resent.
import { useState } from "react";
import { Link } from "react-router";

import { useAlertGroups } from "../api/admin";
import { useAlerts, useResendAlert } from "../api/alerts";
import { ErrorBox } from "../components/ErrorBox";
import { Pager, useUrlFilters } from "../components/listing";
import { useAction } from "../features/admin/useAction";
import { outcomes, parseLog, statusOf, STATUSES } from "../features/alerts/history";
import { t } from "../features/alerts/strings";
import { tTitle } from "../components/strings";
import { useTitle } from "../components/title";

const SIZE = 50;

interface AlertRow {
  id: number;
  title: string;
  alert_type: string;
  status: string;
  attempts: number;
  alert_group_id?: number | null;
  workflow_instance_id?: number | null;
  log?: unknown;
  create_time?: string;
}

export function AlertsPage() {
  useTitle(tTitle.alerts);
  const { params, set, page } = useUrlFilters();
  const status = statusOf(params.get("status"));
  const instance = params.get("instance") ?? "";
  const [instanceText, setInstanceText] = useState(instance);
  const query = {
    page,
    size: SIZE,
    ...(status ? { status } : {}),
    ...(/^\d+$/.test(instance) ? { instance: Number(instance) } : {}),
  };
  const list = useAlerts(query);
  const groups = useAlertGroups();
  const resending = useResendAlert();
  const names = new Map<number, string>();
  for (const g of (groups.data?.items ?? []) as unknown as { senders?: { id?: number; name: string }[] }[])
    for (const s of g.senders ?? []) if (s.id !== undefined) names.set(s.id, s.name);
  const { run, error, busy } = useAction(["alerts"]);
  const [done, setDone] = useState<number | null>(null);
  const resend = (id: number) =>
    run(async () => {
      setDone(null);
      await resending.mutateAsync(id);
      setDone(id);
    });
  const rows = (list.data?.items ?? []) as unknown as AlertRow[];
  return (
    <section data-testid="alerts-page">
      <h1>{t.alerts}</h1>
      <div className="toolbar">
        <label>
          {t.status}{" "}
          <select aria-label={t.status} value={status ?? ""} onChange={(e) => set("status", e.target.value)}>
            <option value="">{t.anyStatus}</option>
            {STATUSES.map((s) => (
              <option key={s} value={s}>
                {s}
              </option>
            ))}
          </select>
        </label>
        <form
          onSubmit={(e) => {
            e.preventDefault();
            set("instance", instanceText.trim());
          }}
        >
          <input
            aria-label={t.instanceFilter}
            placeholder={t.instanceFilter}
            inputMode="numeric"
            value={instanceText}
            onChange={(e) => setInstanceText(e.target.value)}
            onBlur={() => set("instance", instanceText.trim())}
          />
        </form>
      </div>
      <ErrorBox error={error ?? list.error} title={t.alerts} />
      {done !== null && <p role="status">{t.resent(done)}</p>}
      <table className="grid">
        <thead>
          <tr>
            <th>{t.id}</th>
            <th>{t.title}</th>
            <th>{t.type}</th>
            <th>{t.instance}</th>
            <th>{t.status}</th>
            <th>{t.attempts}</th>
            <th>{t.outcome}</th>
            <th>{t.actions}</th>
          </tr>
        </thead>
        <tbody>
          {rows.length === 0 && list.isSuccess && (
            <tr>
              <td colSpan={8}>{t.noAlerts}</td>
            </tr>
          )}
          {rows.map((a) => {
            const log = parseLog(a.log);
            const each = outcomes(log, names, t.senderNo);
            return (
              <tr key={a.id} data-testid={`alert-${a.id}`}>
                <td>{a.id}</td>
                <td>{a.title}</td>
                <td>{a.alert_type}</td>
                <td>
                  {a.workflow_instance_id ? (
                    <Link to={`/instances/${a.workflow_instance_id}`}>{a.workflow_instance_id}</Link>
                  ) : (
                    "—"
                  )}
                </td>
                <td>{a.status}</td>
                <td>{a.attempts}</td>
                <td>
                  <ul className="plain">
                    {each.map((o) => (
                      <li key={`${o.sender}-${o.delivered}`}>
                        {o.sender}: {o.delivered ? t.delivered : `${t.failed} — ${o.reason ?? ""}`}
                      </li>
                    ))}
                    {each.length === 0 && log.note ? <li className="muted">{log.note}</li> : null}
                  </ul>
                </td>
                <td>
                  <button onClick={() => void resend(a.id)} disabled={busy || a.status === "WAIT_EXECUTION"}>
                    {t.resend}
                  </button>
                </td>
              </tr>
            );
          })}
        </tbody>
      </table>
      <Pager
        page={page}
        total={list.data?.total ?? 0}
        size={SIZE}
        noun={t.alerts.toLowerCase()}
        onPage={(p) => set("page", String(p))}
      />
    </section>
  );
}
