// Worker groups managed in the cluster: create a group of live workers (picked from those registered now),
// change its workers or description, delete it (refused with the server's reason while a workflow uses it).
// Each group shows which of its workers are live; groups only workers' own configuration names are listed too.
import { useState, type FormEvent } from "react";

import { useDeleteWorkerGroup, useSaveWorkerGroup, useWorkerGroups } from "../../api/admin";
import { useCluster } from "../../api/queries";
import { ErrorBox } from "../../components/ErrorBox";
import { errorAt, FormField, isFieldError } from "./FormField";
import { common, tWorkerGroups as t } from "./strings";
import { useAction } from "./useAction";

export interface StoredGroup {
  name?: string;
  addresses?: string[];
  live?: string[];
  managed?: boolean;
  description?: string | null;
}

/** A worker a group may list: its address, whether it is registered now, and the group of its config. */
export interface WorkerChoice {
  address: string;
  live: boolean;
  group: string | null;
}

/** The workers to pick from: every live one, and the group's assigned ones that are not live now (kept
 * unless unticked). */
export function workerChoices(
  live: readonly { address: string; group?: string | null }[],
  assigned: readonly string[],
): WorkerChoice[] {
  const out = new Map<string, WorkerChoice>();
  for (const w of live) out.set(w.address, { address: w.address, live: true, group: w.group ?? null });
  for (const a of assigned) if (!out.has(a)) out.set(a, { address: a, live: false, group: null });
  return [...out.values()].sort((a, b) => a.address.localeCompare(b.address));
}

/** Assigned addresses with whether each is live. */
export function assignedState(g: StoredGroup): { address: string; live: boolean }[] {
  const live = new Set(g.live ?? []);
  return (g.addresses ?? []).map((address) => ({ address, live: live.has(address) }));
}

const FIELDS = ["name", "path.name", "description", "addresses"];

export function WorkerGroups() {
  const list = useWorkerGroups(true);
  const cluster = useCluster();
  const deletion = useDeleteWorkerGroup();
  const removal = useAction(["worker-groups"]);
  const [editing, setEditing] = useState<StoredGroup | null>(null);
  const [creating, setCreating] = useState(false);
  const remove = (name: string) => removal.run(() => deletion.mutateAsync(name));
  const live = cluster.data?.workers ?? [];
  return (
    <div data-testid="admin-worker-groups">
      <h2>{t.title}</h2>
      <p className="muted">{t.intro}</p>
      <button
        onClick={() => {
          setEditing(null);
          setCreating(true);
        }}
      >
        {t.add}
      </button>
      {(creating || editing) && (
        <GroupEditor
          key={editing?.name ?? ""}
          stored={editing}
          live={live}
          onDone={() => {
            setCreating(false);
            setEditing(null);
          }}
        />
      )}
      <ErrorBox error={removal.error ?? list.error ?? cluster.error} title={t.title} />
      <table className="grid">
        <thead>
          <tr>
            <th>{common.name}</th>
            <th>{t.assigned}</th>
            <th>{t.live}</th>
            <th>{common.actions}</th>
          </tr>
        </thead>
        <tbody>
          {list.data?.items.map((g: StoredGroup) => {
            const name = g.name ?? "";
            return (
              <tr key={name} data-testid={`worker-group-${name}`}>
                <td>
                  {name}
                  {!g.managed && <div className="muted small">{t.fromConfig}</div>}
                  {g.description && <div className="muted small">{g.description}</div>}
                </td>
                <td>
                  <ul className="plain">
                    {assignedState(g).map((w) => (
                      <li key={w.address}>
                        {w.address}{" "}
                        <span className={w.live ? "badge" : "badge muted"}>
                          {w.live ? t.liveMark : t.downMark}
                        </span>
                      </li>
                    ))}
                  </ul>
                </td>
                <td>
                  {(g.live ?? []).length === 0 ? (
                    <span className="error-inline">{t.noLive}</span>
                  ) : (
                    (g.live ?? []).join(", ")
                  )}
                </td>
                <td>
                  {g.managed && (
                    <div className="toolbar">
                      <button
                        onClick={() => {
                          setCreating(false);
                          setEditing(g);
                        }}
                      >
                        {common.edit}
                      </button>
                      <button disabled={removal.busy} onClick={() => void remove(name)}>
                        {common.remove}
                      </button>
                    </div>
                  )}
                </td>
              </tr>
            );
          })}
        </tbody>
      </table>
    </div>
  );
}

export function GroupEditor({
  stored,
  live,
  onDone,
}: {
  stored: StoredGroup | null;
  live: readonly { address: string; group?: string | null }[];
  onDone: () => void;
}) {
  const [name, setName] = useState(stored?.name ?? "");
  const [description, setDescription] = useState(stored?.description ?? "");
  const [addresses, setAddresses] = useState<string[]>(stored?.addresses ?? []);
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const saving = useSaveWorkerGroup(stored ? (stored.name ?? "") : undefined);
  const at = (field: string) => errorAt(error, field);
  const title = stored ? t.editTitle(stored.name ?? "") : t.newTitle;
  const choices = workerChoices(live, stored?.addresses ?? []);
  const save = async (e: FormEvent) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      if (stored) {
        await saving.mutateAsync({ name: stored.name ?? "", addresses, description });
      } else {
        const body = { name: name.trim(), addresses, ...(description.trim() ? { description } : {}) };
        await saving.mutateAsync(body);
      }
      onDone();
    } catch (exc) {
      setError(exc);
    } finally {
      setBusy(false);
    }
  };
  return (
    <form className="admin-form" onSubmit={save} aria-label={title} data-testid="worker-group-form">
      <h3>{title}</h3>
      <FormField label={t.name} error={at("name") ?? at("path.name")}>
        {(props) => (
          <input
            {...props}
            value={name}
            disabled={stored !== null}
            onChange={(e) => setName(e.target.value)}
          />
        )}
      </FormField>
      <FormField label={t.description} error={at("description")}>
        {(props) => <input {...props} value={description} onChange={(e) => setDescription(e.target.value)} />}
      </FormField>
      <fieldset className={at("addresses") ? "invalid" : undefined}>
        <legend>{t.liveWorkers}</legend>
        {choices.length === 0 && <div className="muted">{t.noneRegistered}</div>}
        {choices.map((w) => (
          <label key={w.address} className="block">
            <input
              type="checkbox"
              aria-label={t.assign(w.address)}
              checked={addresses.includes(w.address)}
              onChange={(e) =>
                setAddresses(
                  e.target.checked ? [...addresses, w.address] : addresses.filter((a) => a !== w.address),
                )
              }
            />{" "}
            {w.address}{" "}
            <span className={w.live ? "badge" : "badge muted"}>{w.live ? t.liveMark : t.downMark}</span>
            {w.group && <span className="muted small"> ({w.group})</span>}
          </label>
        ))}
        {at("addresses") && (
          <div className="error-inline" role="alert">
            {at("addresses")}
          </div>
        )}
      </fieldset>
      {error !== null && !isFieldError(error, FIELDS) && <ErrorBox error={error} title={title} />}
      <div className="toolbar">
        <button type="submit" disabled={busy || !name.trim()}>
          {common.save}
        </button>
        <button type="button" onClick={onDone}>
          {common.cancel}
        </button>
      </div>
    </form>
  );
}
