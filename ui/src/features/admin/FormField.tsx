// A labelled input of an admin form with the server's error for it shown under it (a 400 naming the field).
import { useId, type ReactNode } from "react";

import { ApiError } from "../../api/client";

/** The server's message when ``error`` is a refusal naming ``field`` (or a field inside it:
 * "params.other.x" belongs to "params.other"; "addresses[1]" to "addresses"). */
export function errorAt(error: unknown, field: string): string | undefined {
  if (!(error instanceof ApiError) || !error.field) return undefined;
  const f = error.field;
  return f === field || f.startsWith(`${field}.`) || f.startsWith(`${field}[`) ? error.message : undefined;
}

/** Whether ``error`` names one of ``fields`` (then the form shows it at the field, not in the error box). */
export function isFieldError(error: unknown, fields: readonly string[]): boolean {
  return fields.some((f) => errorAt(error, f) !== undefined);
}

export function FormField({
  label,
  error,
  help,
  children,
}: {
  label: string;
  error?: string | undefined;
  help?: string | undefined;
  /** the input, given its id and aria attributes */
  children: (props: {
    id: string;
    "aria-invalid": boolean;
    "aria-describedby": string | undefined;
  }) => ReactNode;
}) {
  const id = useId();
  const described = error ? `${id}-error` : help ? `${id}-help` : undefined;
  return (
    <div className={`form-field${error ? " invalid" : ""}`}>
      <label htmlFor={id}>{label}</label>
      {children({ id, "aria-invalid": Boolean(error), "aria-describedby": described })}
      {error ? (
        <div className="error-inline" id={`${id}-error`} role="alert">
          {error}
        </div>
      ) : (
        help && (
          <div className="muted small" id={`${id}-help`}>
            {help}
          </div>
        )
      )}
    </div>
  );
}
