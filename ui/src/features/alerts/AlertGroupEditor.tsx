// Create or edit an alert group: its name, description and senders (added, removed, each with the form of its
// channel type). Stored secrets come back as "***" and are kept when left untouched; the server's field errors
// (``senders[0].params.webHook``) show at the field.
import { useState, type FormEvent } from "react";

import { useSaveAlertGroup } from "../../api/admin";
import { ApiError } from "../../api/client";
import { ErrorBox } from "../../components/ErrorBox";
import { errorPlace, fieldsOf, FormError, paramsOf, valuesOf, type AlertType } from "./schemaForm";
import { newSender, SenderEditor, type FieldError, type SenderDraft } from "./SenderEditor";
import { t } from "./strings";

export interface StoredGroup {
  id: number;
  name: string;
  description?: string | null;
  senders: { id?: number; type: string; name: string; params: Record<string, unknown> }[];
}

export function draftsOf(group: StoredGroup | undefined, types: AlertType[]): SenderDraft[] {
  return (group?.senders ?? []).map((s) => {
    const kind = types.find((k) => k.type === s.type);
    const draft: SenderDraft = { type: s.type, name: s.name, values: valuesOf(fieldsOf(kind), s.params) };
    if (s.id !== undefined) draft.id = s.id;
    return draft;
  });
}

/** The request body of a save: the senders' params from their forms (a FormError names a bad one). */
export function bodyOf(name: string, description: string, drafts: SenderDraft[], types: AlertType[]) {
  const senders = drafts.map((d, i) => {
    try {
      const params = paramsOf(fieldsOf(types.find((k) => k.type === d.type)), d.values);
      return { ...(d.id === undefined ? {} : { id: d.id }), type: d.type, name: d.name, params };
    } catch (exc) {
      if (exc instanceof FormError) throw new ApiError(400, exc.message, `senders[${i}].params.${exc.key}`);
      throw exc;
    }
  });
  return { name, description, senders };
}

export function AlertGroupEditor({
  group,
  types,
  onDone,
}: {
  group?: StoredGroup | undefined;
  types: AlertType[];
  onDone: (saved: boolean) => void;
}) {
  const [name, setName] = useState(group?.name ?? "");
  const [description, setDescription] = useState(group?.description ?? "");
  const [drafts, setDrafts] = useState<SenderDraft[]>(() => draftsOf(group, types));
  const [error, setError] = useState<ApiError | null>(null);
  const [busy, setBusy] = useState(false);
  const saving = useSaveAlertGroup(group?.id);
  const place = errorPlace(error?.field);
  const senderError = (i: number): FieldError | undefined =>
    error && place.sender === i
      ? { param: place.param, attr: place.attr, message: error.message }
      : undefined;

  const save = async (e: FormEvent) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const body = bodyOf(name.trim(), description, drafts, types);
      await saving.mutateAsync(body);
      onDone(true);
    } catch (exc) {
      setError(exc instanceof ApiError ? exc : new ApiError(0, String(exc)));
    } finally {
      setBusy(false);
    }
  };
  const first = types[0]?.type ?? "WEBHOOK";
  return (
    <form
      className="alert-group-editor"
      onSubmit={save}
      aria-label={group ? t.editGroup(group.name) : t.newGroup}
    >
      <h3>{group ? t.editGroup(group.name) : t.newGroup}</h3>
      <label>
        {t.groupName}
        <input
          aria-label={t.groupName}
          aria-invalid={place.top === "name" || undefined}
          value={name}
          onChange={(e) => setName(e.target.value)}
        />
      </label>
      <label>
        {t.description}
        <input
          aria-label={t.description}
          value={description}
          onChange={(e) => setDescription(e.target.value)}
        />
      </label>
      {drafts.length === 0 && <p className="muted">{t.noSenders}</p>}
      {drafts.map((d, i) => (
        <SenderEditor
          key={i}
          index={i}
          draft={d}
          types={types}
          error={senderError(i)}
          onChange={(next) => setDrafts(drafts.map((x, j) => (j === i ? next : x)))}
          onRemove={() => setDrafts(drafts.filter((_, j) => j !== i))}
        />
      ))}
      <div className="toolbar">
        <button
          type="button"
          onClick={() =>
            setDrafts([...drafts, newSender(types, first, `${first.toLowerCase()}${drafts.length + 1}`)])
          }
        >
          {t.addSender}
        </button>
        <button type="submit" disabled={busy || !name.trim()}>
          {group ? t.save : t.create}
        </button>
        <button type="button" onClick={() => onDone(false)}>
          {t.cancel}
        </button>
      </div>
      {error && place.sender === undefined && <ErrorBox error={error} title={t.groups} />}
    </form>
  );
}
