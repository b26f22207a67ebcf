// Pure: resource-center paths (``etl/clean.py``), folders and sizes as shown.

/** The breadcrumb of ``folder``: (label, folder path) from the top. */
export function crumbs(folder: string): { name: string; path: string }[] {
  const parts = folder.split("/").filter(Boolean);
  return parts.map((name, i) => ({ name, path: parts.slice(0, i + 1).join("/") }));
}

/** ``name`` in ``folder``. */
export function joinPath(folder: string, name: string): string {
  const f = folder.replace(/^\/+|\/+$/g, "");
  const n = name.replace(/^\/+/, "");
  return f ? `${f}/${n}` : n;
}

/** The folder holding ``path`` ("" at the top). */
export function parentOf(path: string): string {
  const i = path.lastIndexOf("/");
  return i < 0 ? "" : path.slice(0, i);
}

/** Bytes for people: 1023 B, 1.5 KiB, 12 MiB. */
export function formatBytes(n: number | undefined | null): string {
  if (n === undefined || n === null) return "—";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let v = n;
  let u = 0;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u += 1;
  }
  return u === 0 ? `${v} B` : `${v < 10 ? v.toFixed(1) : Math.round(v)} ${units[u]}`;
}

/** The API path of a file's content (a version of it, or the newest). */
export function contentPath(project: string, path: string, version?: number): string {
  const q = new URLSearchParams({ path });
  if (version !== undefined) q.set("version", String(version));
  return `/api/v1/projects/${encodeURIComponent(project)}/resources/content?${q.toString()}`;
}

/** Whole percent of an upload (0 when the size is not known yet). */
export function percent(loaded: number, total: number): number {
  return total > 0 ? Math.min(100, Math.floor((loaded * 100) / total)) : 0;
}
