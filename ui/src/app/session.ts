import { api, session, token } from "../api/client";

/** Forget the token or end the cookie session, and go to the sign-in page, coming back here afterwards. */
export async function signOut(): Promise<void> {
  if (session.csrf() && !token.get()) await api.POST("/api/v1/logout").catch(() => undefined);
  token.clear();
  session.clear();
  const here = window.location.pathname.slice(new URL(".", document.baseURI).pathname.length - 1);
  if (!here.startsWith("/signin")) {
    window.location.assign(
      `${new URL("signin", document.baseURI).pathname}?next=${encodeURIComponent(here)}`,
    );
  }
}
