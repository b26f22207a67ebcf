// Alert groups and their senders: create, edit (senders added, removed, each with the form of its channel type,
// drawn from GET /api/v1/alert-types), send a test alert (each sender's outcome), delete. Secrets are never shown
// back: they read "***" and are kept when left as they are.
import { useState } from "react";

import { useAlertGroups, useAlertTypes, useDeleteAlertGroup, useTestAlertGroup } from "../../api/admin";
import { ErrorBox } from "../../components/ErrorBox";
import { AlertGroupEditor, type StoredGroup } from "../alerts/AlertGroupEditor";
import type { AlertType } from "../alerts/schemaForm";
import { t } from "../alerts/strings";
import { TestOutcome, type SenderOutcome } from "../alerts/testOutcome";
import { useAction } from "./useAction";

export function AlertGroups() {
  const list = useAlertGroups();
  const alertTypes = useAlertTypes();
  const types = { ...alertTypes, data: alertTypes.data as unknown as AlertType[] | undefined };
  const removal = useDeleteAlertGroup();
  const testing = useTestAlertGroup();
  const { run, error, busy } = useAction(["alert-groups"]);
  const [editing, setEditing] = useState<StoredGroup | "new" | null>(null);
  const [tested, setTested] = useState<{ group: number; outcomes: SenderOutcome[] } | null>(null);
  const groups = (list.data?.items ?? []) as unknown as StoredGroup[];
  const remove = (id: number) => run(() => removal.mutateAsync(id));
  const test = (id: number) =>
    run(async () => {
      setTested(null);
      const answer = (await testing.mutateAsync(id)) as unknown as { senders: SenderOutcome[] };
      setTested({ group: id, outcomes: answer.senders });
    });
  return (
    <div data-testid="admin-alert-groups">
      <h2>{t.groups}</h2>
      {editing === null ? (
        <div className="toolbar">
          <button onClick={() => setEditing("new")} disabled={!types.data}>
            {t.newGroup}
          </button>
        </div>
      ) : (
        <AlertGroupEditor
          key={editing === "new" ? "new" : editing.id}
          group={editing === "new" ? undefined : editing}
          types={types.data ?? []}
          onDone={() => setEditing(null)}
        />
      )}
      <ErrorBox error={error ?? list.error ?? types.error} title={t.groups} />
      <table className="grid">
        <thead>
          <tr>
            <th>{t.id}</th>
            <th>{t.name}</th>
            <th>{t.senders}</th>
            <th>{t.actions}</th>
          </tr>
        </thead>
        <tbody>
          {groups.map((g) => (
            <tr key={g.id} data-testid={`alert-group-${g.name}`}>
              <td>{g.id}</td>
              <td>
                {g.name}
                {g.description ? <div className="muted">{g.description}</div> : null}
              </td>
              <td>
                <ul className="plain">
                  {g.senders.map((s) => (
                    <li key={s.id ?? s.name}>
                      {s.name} ({s.type})
                    </li>
                  ))}
                </ul>
                {tested?.group === g.id && <TestOutcome outcomes={tested.outcomes} />}
              </td>
              <td>
                <button onClick={() => setEditing(g)} disabled={!types.data}>
                  {t.edit}
                </button>{" "}
                <button onClick={() => void test(g.id)} disabled={busy}>
                  {t.sendTest}
                </button>{" "}
                <button onClick={() => void remove(g.id)} disabled={busy}>
                  {t.remove}
                </button>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
