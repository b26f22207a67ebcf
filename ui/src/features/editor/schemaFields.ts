// Pure: a task type's parameter schema (JSON Schema, from GET /api/v1/task-types) -> the fields of its form,
// and the text <-> value conversions of each kind of field.

export interface JsonSchema {
  type?: string | string[];
  enum?: unknown[];
  examples?: unknown[];
  default?: unknown;
  description?: string;
  contentMediaType?: string;
  properties?: Record<string, JsonSchema>;
  required?: string[];
}

export type FieldKind = "text" | "code" | "integer" | "number" | "boolean" | "choice" | "json";

export interface Field {
  name: string;
  kind: FieldKind;
  required: boolean;
  description: string;
  /** choices of a "choice" field; suggestions of a "text" one */
  options: string[];
  default?: unknown;
  /** a "code" field's contentMediaType (text/x-shellscript, text/x-python, text/x-sql) */
  mediaType?: string;
}

function kindOf(schema: JsonSchema): FieldKind {
  if (schema.enum) return "choice";
  const types = schema.type === undefined ? [] : [schema.type].flat();
  if (types.length !== 1) return "json";
  switch (types[0]) {
    case "string":
      return schema.contentMediaType ? "code" : "text";
    case "integer":
      return "integer";
    case "number":
      return "number";
    case "boolean":
      return "boolean";
    default:
      return "json";
  }
}

/** The form's fields, required ones first, then in the schema's order. */
export function fieldsOf(schema: JsonSchema | undefined): Field[] {
  const required = new Set(schema?.required ?? []);
  const fields = Object.entries(schema?.properties ?? {}).map(([name, prop]) => ({
    name,
    kind: kindOf(prop),
    required: required.has(name),
    description: prop.description ?? "",
    options: (prop.enum ?? (kindOf(prop) === "text" ? (prop.examples ?? []) : [])).map(String),
    default: prop.default,
    mediaType: prop.contentMediaType,
  }));
  return [...fields.filter((f) => f.required), ...fields.filter((f) => !f.required)];
}

/** What a field's input shows for a value (json fields: pretty JSON; absent: empty). */
export function toText(field: Field, value: unknown): string {
  if (value === undefined || value === null) return "";
  if (field.kind === "json") return JSON.stringify(value, null, 2);
  return String(value);
}

/** The value of a field's text: undefined removes the parameter (empty input); a problem when it cannot be
 * read. Choices keep the type of the schema's options (numbers stay numbers). */
export function fromText(field: Field, text: string): { value?: unknown; problem?: string } {
  if (text.trim() === "" && field.kind !== "code" && field.kind !== "text") return {};
  if (text === "") return {};
  switch (field.kind) {
    case "integer": {
      const n = Number(text);
      return Number.isInteger(n) ? { value: n } : { problem: "must be a whole number" };
    }
    case "number": {
      const n = Number(text);
      return Number.isFinite(n) ? { value: n } : { problem: "must be a number" };
    }
    case "json":
      try {
        return { value: JSON.parse(text) as unknown };
      } catch (exc) {
        return { problem: `not JSON: ${(exc as Error).message}` };
      }
    default:
      return { value: text };
  }
}

/** The params of a new task of the type: a copy of its schema's first example (or none). */
export function templateOf(schema: JsonSchema | undefined): Record<string, unknown> {
  const example = schema?.examples?.[0];
  return example && typeof example === "object" && !Array.isArray(example)
    ? (structuredClone(example) as Record<string, unknown>)
    : {};
}
