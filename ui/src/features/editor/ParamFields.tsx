// A form built from a JSON Schema's properties (schemaFields.ts): one labelled input per parameter, the
// server's error shown under the field it names.
import { useEffect, useRef, useState } from "react";

import { CodeField } from "./CodeField";
import { fromText, toText, type Field } from "./schemaFields";

export function FieldInput({
  field,
  value,
  error,
  onChange,
}: {
  field: Field;
  value: unknown;
  error?: string;
  onChange: (value: unknown) => void;
}) {
  const [text, setText] = useState(() => toText(field, value));
  const [problem, setProblem] = useState<string | undefined>();
  // a value changed elsewhere (the text view, another task selected) replaces what is shown
  // (not the echo of this input's own edit: "1." stays "1." while its value is 1)
  const shownText = useRef(text);
  shownText.current = text;
  useEffect(() => {
    const read = fromText(field, shownText.current);
    if (!read.problem && JSON.stringify(read.value) === JSON.stringify(value)) return;
    setText(toText(field, value));
    setProblem(undefined);
  }, [field, value]);

  const id = `param-${field.name}`;
  const shown = problem ?? error;
  const edit = (next: string) => {
    setText(next);
    const read = fromText(field, next);
    setProblem(read.problem);
    if (!read.problem) onChange(read.value);
  };
  const common = {
    id,
    "aria-invalid": Boolean(shown),
    "aria-describedby": shown ? `${id}-error` : field.description ? `${id}-help` : undefined,
  };
  let input;
  if (field.kind === "boolean")
    input = (
      <input
        {...common}
        type="checkbox"
        checked={value === true}
        onChange={(e) => onChange(e.target.checked ? true : undefined)}
      />
    );
  else if (field.kind === "choice")
    input = (
      <select {...common} value={text} onChange={(e) => edit(e.target.value)}>
        <option value="">{field.default === undefined ? "—" : `default (${String(field.default)})`}</option>
        {field.options.map((o) => (
          <option key={o}>{o}</option>
        ))}
      </select>
    );
  else if (field.kind === "code")
    input = (
      <CodeField
        id={id}
        label={field.name}
        value={text}
        mediaType={field.mediaType}
        describedBy={common["aria-describedby"]}
        invalid={common["aria-invalid"]}
        onChange={edit}
      />
    );
  else if (field.kind === "json")
    input = (
      <textarea {...common} rows={3} spellCheck={false} value={text} onChange={(e) => edit(e.target.value)} />
    );
  else
    input = (
      <>
        <input
          {...common}
          type={field.kind === "text" ? "text" : "number"}
          list={field.options.length ? `${id}-options` : undefined}
          placeholder={field.default === undefined ? "" : String(field.default)}
          value={text}
          onChange={(e) => edit(e.target.value)}
        />
        {field.options.length > 0 && (
          <datalist id={`${id}-options`}>
            {field.options.map((o) => (
              <option key={o} value={o} />
            ))}
          </datalist>
        )}
      </>
    );
  return (
    <div className={`form-field${shown ? " invalid" : ""}`} data-testid={`field-${field.name}`}>
      <label htmlFor={id}>
        {field.name}
        {field.required && <span aria-label="required"> *</span>}
      </label>
      {input}
      {shown ? (
        <div className="error-inline" id={`${id}-error`} role="alert">
          {shown}
        </div>
      ) : (
        field.description && (
          <div className="muted small" id={`${id}-help`}>
            {field.description}
          </div>
        )
      )}
    </div>
  );
}

export function ParamFields({
  fields,
  values,
  errors,
  onChange,
}: {
  fields: readonly Field[];
  values: Record<string, unknown>;
  /** field name -> the server's message */
  errors: ReadonlyMap<string, string>;
  onChange: (values: Record<string, unknown>) => void;
}) {
  return (
    <>
      {fields.map((f) => (
        <FieldInput
          key={f.name}
          field={f}
          value={values[f.name]}
          error={errors.get(f.name)}
          onChange={(v) => {
            const next = { ...values };
            if (v === undefined) delete next[f.name];
            else next[f.name] = v;
            onChange(next);
          }}
        />
      ))}
    </>
  );
}
