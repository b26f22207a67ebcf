// A sender's form, generated from its channel type's JSON Schema (GET /api/v1/alert-types): the fields, the
// values they start with (from stored params, secrets shown as "***"), and the params sent back. Pure functions.

import { t as tAlerts } from "./strings";

export interface ParamSchema {
  type?: string | string[];
  enum?: unknown[];
  description?: string;
  default?: unknown;
  writeOnly?: boolean;
  format?: string;
  items?: unknown;
}
export interface ObjectSchema {
  required?: string[];
  properties?: Record<string, ParamSchema>;
}
export interface AlertType {
  type: string;
  summary: string;
  params: ObjectSchema;
  secret: string[];
}

export type FieldKind = "text" | "password" | "number" | "boolean" | "choice" | "list" | "json";
export interface Field {
  key: string;
  kind: FieldKind;
  required: boolean;
  description: string;
  options: string[];
  secret: boolean;
}
export type Values = Record<string, string | boolean>;

export const MASK = "***";

export function fieldsOf(kind: AlertType | undefined): Field[] {
  if (!kind) return [];
  const required = new Set(kind.params.required ?? []);
  return Object.entries(kind.params.properties ?? {}).map(([key, p]) => {
    const secret = Boolean(p.writeOnly) || p.format === "password" || kind.secret.includes(key);
    let fieldKind: FieldKind = "text";
    if (p.enum) fieldKind = "choice";
    else if (p.type === "object") fieldKind = "json";
    else if (p.type === "array") fieldKind = "list";
    else if (p.type === "integer" || p.type === "number") fieldKind = "number";
    else if (p.type === "boolean") fieldKind = "boolean";
    else if (secret) fieldKind = "password";
    return {
      key,
      kind: fieldKind,
      required: required.has(key),
      description: p.description ?? "",
      options: (p.enum ?? []).map(String),
      secret,
    };
  });
}

/** The form's starting values: stored params (an edit) or the schema's defaults (a new sender). */
export function valuesOf(
  fields: Field[],
  params: Record<string, unknown> | undefined,
  schema?: ObjectSchema,
): Values {
  const out: Values = {};
  for (const f of fields) {
    const value = params ? params[f.key] : schema?.properties?.[f.key]?.default;
    if (value === undefined || value === null) out[f.key] = f.kind === "boolean" ? false : "";
    else if (f.kind === "boolean") out[f.key] = Boolean(value);
    else if (f.kind === "json") out[f.key] = JSON.stringify(value);
    else if (Array.isArray(value)) out[f.key] = value.map(String).join(", ");
    else if (typeof value === "object") out[f.key] = JSON.stringify(value);
    else out[f.key] = String(value as string | number);
  }
  return out;
}

/** A field the form itself refuses before the server sees it. */
export class FormError extends Error {
  constructor(
    readonly key: string,
    message: string,
  ) {
    super(message);
  }
}

/** The params to send: empty optional fields left out, "***" (a kept secret) sent back as is. */
export function paramsOf(fields: Field[], values: Values): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const f of fields) {
    const value = values[f.key];
    if (f.kind === "boolean") {
      if (value) out[f.key] = true;
      continue;
    }
    const text = typeof value === "string" ? value.trim() : "";
    if (!text) continue;
    if (f.kind === "number") out[f.key] = Number(text);
    else if (f.kind === "list")
      out[f.key] = text
        .split(",")
        .map((s) => s.trim())
        .filter(Boolean);
    else if (f.kind === "json") {
      let parsed: unknown;
      try {
        parsed = JSON.parse(text);
      } catch {
        parsed = undefined;
      }
      if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed))
        throw new FormError(f.key, tAlerts.badJson);
      out[f.key] = parsed;
    } else out[f.key] = text;
  }
  return out;
}

/** Where a server error belongs: ``senders[2].params.webHook`` -> sender 2, param webHook; ``senders[0].type`` ->
 * sender 0, attribute type; ``name`` -> the group's own field. */
export interface ErrorPlace {
  sender?: number;
  param?: string;
  attr?: string;
  top?: string;
}
export function errorPlace(field: string | undefined): ErrorPlace {
  if (!field) return {};
  const m = /^senders\[(\d+)\](?:\.params\.(.+)|\.(\w+))?$/.exec(field);
  if (!m) return { top: field };
  return { sender: Number(m[1]), param: m[2], attr: m[3] };
}
