// The only way components reach the API: a typed openapi-fetch client over the generated schema
// (src/api/generated, from openapi.json = the server's route table), plus the token and error handling.
import createClient, { type Middleware } from "openapi-fetch";

import { connection } from "../features/live/connection";
import type { components, paths } from "./generated/schema";

export type Schemas = components["schemas"];
type Json<P extends keyof paths, M extends keyof paths[P]> = paths[P][M] extends {
  responses: infer R;
}
  ? R extends { 200: { content: { "application/json": infer B } } }
    ? B
    : R extends { 201: { content: { "application/json": infer B } } }
      ? B
      : R extends { 202: { content: { "application/json": infer B } } }
        ? B
        : never
  : never;

export type InstancePage = Json<"/api/v1/instances", "get">;
export type Instance = InstancePage["items"][number];
export type InstanceDetail = Json<"/api/v1/instances/{id}", "get">;
export type TaskInstance = Schemas["TaskInstance"];
export type WorkflowPage = Json<"/api/v1/workflows", "get">;
export type WorkflowSummary = WorkflowPage["items"][number];
export type WorkflowDetail = Json<"/api/v1/workflows/{code}", "get">;
export type WorkflowDoc = Schemas["Workflow"];
export type Cluster = Json<"/api/v1/cluster", "get">;
export type LogLines = Json<"/api/v1/tasks/{id}/log", "get">;
export type LogSearch = Json<"/api/v1/tasks/{id}/log/search", "get">;
export type Overview = Json<"/api/v1/overview", "get">;
export type Me = Json<"/api/v1/me", "get">;
export type ControlResult = Json<"/api/v1/instances/{id}/stop", "post">;
export type Waiting = Json<"/api/v1/instances/{id}/waiting", "get">;
export type TaskWait = Waiting["tasks"][number];

/** An API answer that is not a success, with the server's message (and field, for a 400). */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly field?: string,
  ) {
    super(message);
  }
}

const TOKEN_KEY = "porpoise.token";
export const token = {
  get: (): string | null => sessionStorage.getItem(TOKEN_KEY),
  set: (value: string) => sessionStorage.setItem(TOKEN_KEY, value),
  clear: () => sessionStorage.removeItem(TOKEN_KEY),
};

/** A password sign-in: the session itself is an HttpOnly cookie the browser sends; this tab keeps the CSRF
 * token the server answered, repeated in X-CSRF-Token on every call that changes something. */
const CSRF_KEY = "porpoise.csrf";
export const session = {
  csrf: (): string | null => sessionStorage.getItem(CSRF_KEY),
  set: (csrf: string) => sessionStorage.setItem(CSRF_KEY, csrf),
  clear: () => sessionStorage.removeItem(CSRF_KEY),
};

/** Signed in here: with an API token or a session cookie. */
export function signedIn(): boolean {
  return token.get() !== null || session.csrf() !== null;
}

const SAFE = new Set(["GET", "HEAD", "OPTIONS"]);

/** The headers that authenticate a call of ``method``. */
export function authHeaders(method = "GET"): Record<string, string> {
  const value = token.get();
  if (value) return { Authorization: `Bearer ${value}` };
  const csrf = session.csrf();
  return csrf && !SAFE.has(method.toUpperCase()) ? { "X-CSRF-Token": csrf } : {};
}

/** The app's base URL without the trailing slash (from <base href>: it may live under a proxy prefix). */
export function baseUrl(): string {
  return new URL(".", document.baseURI).href.replace(/\/$/, "");
}

const auth: Middleware = {
  onRequest({ request }) {
    for (const [name, value] of Object.entries(authHeaders(request.method))) request.headers.set(name, value);
    return request;
  },
};

export const api = createClient<paths>({ baseUrl: baseUrl() });
api.use(auth);

/** Called when the server says the token is not (or no longer) valid. */
let onUnauthorized: () => void = () => {};
export function setUnauthorizedHandler(handler: () => void): void {
  onUnauthorized = handler;
}

export function errorOf(status: number, body: unknown): ApiError {
  const err = (body as { error?: { message?: string; field?: string } } | undefined)?.error;
  const message = err?.message ?? `the server answered ${status}`;
  return new ApiError(status, message, err?.field);
}

/** Await an openapi-fetch call: its data, or an ApiError carrying the server's message. */
export async function call<T>(
  pending: Promise<{ data?: T; error?: unknown; response: Response }>,
): Promise<T> {
  let result: { data?: T; error?: unknown; response: Response };
  try {
    result = await pending;
  } catch (exc) {
    connection.report(false);
    throw new ApiError(0, `cannot reach the API server (${(exc as Error).message})`);
  }
  connection.report(true);
  const { data, error, response } = result;
  if (response.ok) return data as T;
  if (response.status === 401) onUnauthorized();
  throw errorOf(response.status, error);
}
