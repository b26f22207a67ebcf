// A download signed in with an API token: a link does not send the Authorization header, so the file is fetched
// into the page with it and handed to the browser as a blob (with a session cookie a plain link is used instead).
import { authHeaders, errorOf } from "./client";

/** Fetch ``url`` with the caller's credentials and save it as ``filename``; a refusal is an ApiError. */
export async function downloadWithToken(url: string, filename: string): Promise<void> {
  const response = await fetch(url, { headers: authHeaders() });
  if (!response.ok) throw errorOf(response.status, await response.json().catch(() => undefined));
  const href = URL.createObjectURL(await response.blob());
  const a = document.createElement("a");
  a.href = href;
  a.download = filename;
  a.click();
  URL.revokeObjectURL(href);
}
