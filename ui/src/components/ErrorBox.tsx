import { ApiError } from "../api/client";
import { tCommon } from "./strings";

/** Every API error on screen, with the server's message (and the field it names). */
export function ErrorBox({ error, title }: { error: unknown; title?: string }) {
  if (!error) return null;
  const message = error instanceof Error ? error.message : String(error);
  const status = error instanceof ApiError && error.status > 0 ? ` (${error.status})` : "";
  const field = error instanceof ApiError && error.field ? tCommon.field(error.field) : "";
  return (
    <div className="error" role="alert">
      <strong>
        {title ?? tCommon.error}
        {status}:
      </strong>{" "}
      {message}
      {field}
    </div>
  );
}

export function Loading({ what }: { what: string }) {
  return (
    <div className="loading" role="status">
      {tCommon.loading(what)}
    </div>
  );
}
