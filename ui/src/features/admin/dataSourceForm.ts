// Pure: the data-source form by type (engine/api/datasources.py validates the same fields: host, port,
// database, user, password, other session settings, and a dsn for POSTGRESQL only). The secrets come back
// as "***": an edit that leaves one empty sends the mask back, which keeps the stored one.
import { ApiError } from "../../api/client";
import { tDataSources as t } from "./strings";

export const MASK = "***";
export const SOURCE_TYPES = ["POSTGRESQL", "MYSQL", "HIVE", "CLICKHOUSE"] as const;
export type SourceType = (typeof SOURCE_TYPES)[number];
/** The port the server uses when a source names none (engine/tasks/sql_dialects DEFAULT_PORTS). */
export const DEFAULT_PORTS: Record<SourceType, number> = {
  POSTGRESQL: 5432,
  MYSQL: 3306,
  HIVE: 10000,
  CLICKHOUSE: 9000,
};
/** What the driver uses when the field is empty (shown as the placeholder). */
export const DEFAULTS: Record<SourceType, { user: string; database: string }> = {
  POSTGRESQL: { user: "", database: "" },
  MYSQL: { user: "", database: "" },
  HIVE: { user: "anonymous", database: "default" },
  CLICKHOUSE: { user: "default", database: "default" },
};

export interface SourceForm {
  name: string;
  type: SourceType;
  host: string;
  port: string;
  database: string;
  user: string;
  password: string;
  dsn: string;
  /** session settings, one name=value a line */
  other: string;
  note: string;
}

export function emptyForm(type: SourceType = "POSTGRESQL"): SourceForm {
  return {
    name: "",
    type,
    host: "127.0.0.1",
    port: String(DEFAULT_PORTS[type]),
    database: "",
    user: "",
    password: "",
    dsn: "",
    other: "",
    note: "",
  };
}

export function isSourceType(value: unknown): value is SourceType {
  return typeof value === "string" && (SOURCE_TYPES as readonly string[]).includes(value);
}

/** A new type: its default port replaces the old type's default (a port the user typed stays); a dsn goes
 * with POSTGRESQL. */
export function withType(form: SourceForm, type: SourceType): SourceForm {
  const port =
    form.port === "" || form.port === String(DEFAULT_PORTS[form.type])
      ? String(DEFAULT_PORTS[type])
      : form.port;
  return { ...form, type, port, dsn: type === "POSTGRESQL" ? form.dsn : "" };
}

/** The form of a stored source (secrets empty: "stored, leave empty to keep it"). */
export function formOf(stored: {
  name?: string;
  type?: string;
  params?: Record<string, unknown>;
  note?: unknown;
}): SourceForm {
  const p = stored.params ?? {};
  const type = isSourceType(stored.type) ? stored.type : "POSTGRESQL";
  const text = (v: unknown) => (v === undefined || v === null ? "" : String(v));
  const other = p.other && typeof p.other === "object" ? (p.other as Record<string, unknown>) : {};
  return {
    name: stored.name ?? "",
    type,
    host: text(p.host),
    // a source saved without a port keeps none (the type's default applies): sending one would be a change
    port: text(p.port),
    database: text(p.database),
    user: text(p.user),
    password: "",
    dsn: "",
    other: Object.entries(other)
      .map(([k, v]) => `${k}=${String(v)}`)
      .join("\n"),
    note: text(stored.note),
  };
}

/** "name=value" lines -> an object (numbers and booleans as such); an ApiError at params.other otherwise. */
export function parseOther(text: string): Record<string, string | number | boolean> {
  const out: Record<string, string | number | boolean> = {};
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (!line) continue;
    const eq = line.indexOf("=");
    if (eq <= 0) throw new ApiError(400, t.badOther(line), "params.other");
    const key = line.slice(0, eq).trim();
    const value = line.slice(eq + 1).trim();
    out[key] =
      value === "true"
        ? true
        : value === "false"
          ? false
          : /^-?\d+(\.\d+)?$/.test(value)
            ? Number(value)
            : value;
  }
  return out;
}

/** The PUT body of the form; which secrets the stored source has decides what an empty secret sends. */
export function sourceBody(f: SourceForm, stored: { password: boolean; dsn: boolean } | null) {
  const port = Number(f.port);
  if (f.port.trim() !== "" && (!Number.isInteger(port) || port < 1 || port > 65535))
    throw new ApiError(400, t.badPort, "params.port");
  const params: Record<string, unknown> = {};
  if (f.dsn || (stored?.dsn && f.type === "POSTGRESQL")) {
    params.dsn = f.dsn || MASK;
  } else {
    params.host = f.host.trim();
    if (f.port.trim() !== "") params.port = port;
    params.database = f.database.trim();
  }
  params.user = f.user;
  if (f.password) params.password = f.password;
  else if (stored?.password) params.password = MASK;
  const other = parseOther(f.other);
  if (Object.keys(other).length) params.other = other;
  return { type: f.type, params, ...(f.note.trim() ? { note: f.note } : {}) };
}

/** Which secrets a listed source holds (its params show them as "***"). */
export function storedSecrets(params: Record<string, unknown> | undefined): {
  password: boolean;
  dsn: boolean;
} {
  return { password: params?.password === MASK, dsn: params?.dsn === MASK };
}
