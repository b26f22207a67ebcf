import { endSession } from "../api/session";

/** Forget the token or end the cookie session, and go to the sign-in page, coming back here afterwards. */
export async function signOut(): Promise<void> {
  await endSession();
  const here = window.location.pathname.slice(new URL(".", document.baseURI).pathname.length - 1);
  if (!here.startsWith("/signin")) {
    window.location.assign(
      `${new URL("signin", document.baseURI).pathname}?next=${encodeURIComponent(here)}`,
    );
  }
}
