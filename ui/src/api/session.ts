// Signing in and out: the token exchange with the server and what this tab keeps of it (client.ts: the API
// token, or the CSRF token of a cookie session).
import { useMutation, useQueryClient } from "@tanstack/react-query";

import { api, call, session, token } from "./client";
import { keys } from "./queries";

export type Credentials = { user: string; password: string } | { token: string };

/** Sign in with a password (the server sets the session cookie and answers the CSRF token this tab keeps) or
 * with an API token (kept once /me accepts it). A refusal leaves nothing kept, and is thrown. */
export async function signIn(credentials: Credentials): Promise<void> {
  token.clear();
  session.clear();
  try {
    if ("token" in credentials) {
      token.set(credentials.token);
      await call(api.GET("/api/v1/me"));
    } else {
      const answer = await call(api.POST("/api/v1/login", { body: credentials }));
      session.set(answer.csrf_token ?? "");
    }
  } catch (exc) {
    token.clear();
    session.clear();
    throw exc;
  }
}

/** Sign in (see signIn); who is signed in is asked again afterwards. */
export function useSignIn() {
  const client = useQueryClient();
  return useMutation({
    mutationFn: signIn,
    onSuccess: () => client.invalidateQueries({ queryKey: keys.me }),
  });
}

/** End a cookie session on the server (a failure to reach it is ignored) and forget what this tab kept. */
export async function endSession(): Promise<void> {
  if (session.csrf() && !token.get()) await api.POST("/api/v1/logout").catch(() => undefined);
  token.clear();
  session.clear();
}
