// One sender of an alert group: its name, its channel type, and the form that type's schema describes.
import { fieldsOf, MASK, valuesOf, type AlertType, type Field, type Values } from "./schemaForm";
import { t } from "./strings";

export interface SenderDraft {
  id?: number;
  type: string;
  name: string;
  values: Values;
}

/** A server error shown at the field it names. */
export interface FieldError {
  param?: string;
  attr?: string;
  message: string;
}

export function newSender(types: AlertType[], type: string, name: string): SenderDraft {
  const kind = types.find((k) => k.type === type);
  return { type, name, values: valuesOf(fieldsOf(kind), undefined, kind?.params) };
}

function FieldInput({
  field,
  value,
  label,
  invalid,
  onChange,
}: {
  field: Field;
  value: string | boolean;
  label: string;
  invalid: boolean;
  onChange: (value: string | boolean) => void;
}) {
  const common = { "aria-label": label, "aria-invalid": invalid || undefined, name: field.key };
  if (field.kind === "boolean")
    return (
      <input
        type="checkbox"
        {...common}
        checked={value === true}
        onChange={(e) => onChange(e.target.checked)}
      />
    );
  const text = typeof value === "string" ? value : "";
  if (field.kind === "choice")
    return (
      <select {...common} value={text} onChange={(e) => onChange(e.target.value)}>
        {!field.required && <option value="">—</option>}
        {field.options.map((o) => (
          <option key={o} value={o}>
            {o}
          </option>
        ))}
      </select>
    );
  const type = field.kind === "password" ? "password" : field.kind === "number" ? "number" : "text";
  return (
    <input
      {...common}
      type={type}
      autoComplete={field.secret ? "new-password" : "off"}
      value={text}
      onChange={(e) => onChange(e.target.value)}
    />
  );
}

export function SenderEditor({
  index,
  draft,
  types,
  error,
  onChange,
  onRemove,
}: {
  index: number;
  draft: SenderDraft;
  types: AlertType[];
  error?: FieldError | undefined;
  onChange: (draft: SenderDraft) => void;
  onRemove: () => void;
}) {
  const kind = types.find((k) => k.type === draft.type);
  const fields = fieldsOf(kind);
  const prefix = t.sender(index + 1);
  const at = (key: string) => (error?.param === key ? error.message : undefined);
  const attrError = error && !error.param ? error.message : undefined;
  return (
    <fieldset className="sender" data-testid={`sender-${index}`}>
      <legend>{prefix}</legend>
      <label>
        {t.senderName}
        <input
          aria-label={`${prefix} ${t.senderName}`}
          value={draft.name}
          onChange={(e) => onChange({ ...draft, name: e.target.value })}
        />
      </label>
      <label>
        {t.senderType}
        <select
          aria-label={`${prefix} ${t.senderType}`}
          value={draft.type}
          onChange={(e) => onChange({ ...newSender(types, e.target.value, draft.name), ...idOf(draft) })}
        >
          {types.map((k) => (
            <option key={k.type} value={k.type}>
              {k.type}
            </option>
          ))}
        </select>
      </label>
      <button type="button" onClick={onRemove}>
        {t.removeSender}
      </button>
      {attrError && (
        <p className="field-error" role="alert">
          {error?.attr ? `${error.attr}: ` : ""}
          {attrError}
        </p>
      )}
      {kind && <p className="muted">{kind.summary}</p>}
      <div className="param-fields">
        {fields.map((f) => {
          const message = at(f.key);
          const value = draft.values[f.key] ?? "";
          return (
            <label key={f.key} className="param-field">
              <span>
                {f.key}
                {f.required ? " *" : ""}
              </span>
              <FieldInput
                field={f}
                value={value}
                label={`${prefix} ${f.key}`}
                invalid={Boolean(message)}
                onChange={(v) => onChange({ ...draft, values: { ...draft.values, [f.key]: v } })}
              />
              <small>
                {f.description}
                {f.secret && value === MASK ? ` (${t.secretKept})` : ""}
              </small>
              {message && (
                <span className="field-error" role="alert">
                  {message}
                </span>
              )}
            </label>
          );
        })}
      </div>
    </fieldset>
  );
}

function idOf(draft: SenderDraft): { id?: number } {
  return draft.id === undefined ? {} : { id: draft.id };
}
