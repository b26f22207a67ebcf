import { token } from "../api/client";

/** Forget the token and go to the sign-in page, coming back here afterwards. */
export function signOut(): void {
  token.clear();
  const here = window.location.pathname.slice(new URL(".", document.baseURI).pathname.length - 1);
  if (!here.startsWith("/signin")) {
    window.location.assign(
      `${new URL("signin", document.baseURI).pathname}?next=${encodeURIComponent(here)}`,
    );
  }
}
