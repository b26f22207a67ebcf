import { useState, type FormEvent } from "react";
import { useNavigate, useSearchParams } from "react-router";

import { api, call, session, token } from "../api/client";
import { ErrorBox } from "../components/ErrorBox";
import { tCommon } from "../components/strings";
import { tSignIn as TEXT } from "./strings";
import { tTitle } from "../components/strings";
import { useTitle } from "../components/title";

/** Sign in with a user name and password (a session cookie for this browser, CSRF token for this tab), or
 * with an API token (porpoise token create, or the one `make run` prints). */
export function SignIn() {
  useTitle(tTitle.signIn);
  const [mode, setMode] = useState<"password" | "token">("password");
  const [user, setUser] = useState("");
  const [secret, setSecret] = useState("");
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const navigate = useNavigate();
  const [params] = useSearchParams();

  const submit = async (event: FormEvent) => {
    event.preventDefault();
    setBusy(true);
    setError(null);
    token.clear();
    session.clear();
    try {
      if (mode === "password") {
        const answer = await call(
          api.POST("/api/v1/login", { body: { user: user.trim(), password: secret } }),
        );
        session.set(answer.csrf_token ?? "");
      } else {
        token.set(secret.trim());
        await call(api.GET("/api/v1/me"));
      }
      navigate(params.get("next") || "/instances", { replace: true });
    } catch (exc) {
      token.clear();
      session.clear();
      setError(exc);
    } finally {
      setBusy(false);
    }
  };

  const ready = mode === "password" ? user.trim() !== "" && secret !== "" : secret.trim() !== "";
  return (
    <main className="signin">
      <h1>{tCommon.brand}</h1>
      <div role="group" aria-label={TEXT.with}>
        <button aria-pressed={mode === "password"} onClick={() => setMode("password")}>
          {TEXT.userAndPassword}
        </button>
        <button aria-pressed={mode === "token"} onClick={() => setMode("token")}>
          {TEXT.apiToken}
        </button>
      </div>
      <form onSubmit={submit} aria-label={TEXT.signIn}>
        {mode === "password" && (
          <>
            <label htmlFor="user">{TEXT.user}</label>
            <input
              id="user"
              autoComplete="username"
              autoFocus
              value={user}
              onChange={(e) => setUser(e.target.value)}
            />
          </>
        )}
        <label htmlFor="secret">{mode === "password" ? TEXT.password : TEXT.apiToken}</label>
        <input
          id="secret"
          type="password"
          autoComplete="current-password"
          value={secret}
          onChange={(e) => setSecret(e.target.value)}
          placeholder={mode === "token" ? TEXT.tokenPlaceholder : ""}
        />
        <button type="submit" disabled={busy || !ready}>
          {TEXT.signIn}
        </button>
        <ErrorBox error={error} title={TEXT.failed} />
        <p className="hint">{mode === "password" ? TEXT.cookieHint : TEXT.tokenHint}</p>
        <p className="hint" data-testid="first-sign-in">
          {TEXT.firstTime}
        </p>
      </form>
    </main>
  );
}
