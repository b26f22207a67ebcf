import { useState, type FormEvent } from "react";
import { useNavigate, useSearchParams } from "react-router";

import { api, call, session, token } from "../api/client";
import { ErrorBox } from "../components/ErrorBox";
import { tTitle } from "../components/strings";
import { useTitle } from "../components/title";

const TEXT = {
  firstTime:
    "First sign-in: the standalone (make run) prints user admin's first password in its start banner, and keeps " +
    "it in admin-password in its run directory until you change it. On a cluster, your admin makes your user " +
    "(porpoise user create), or gives you an API token.",
};

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
      <h1>Porpoise</h1>
      <div role="group" aria-label="Sign in with">
        <button aria-pressed={mode === "password"} onClick={() => setMode("password")}>
          User and password
        </button>
        <button aria-pressed={mode === "token"} onClick={() => setMode("token")}>
          API token
        </button>
      </div>
      <form onSubmit={submit} aria-label="Sign in">
        {mode === "password" && (
          <>
            <label htmlFor="user">User</label>
            <input
              id="user"
              autoComplete="username"
              autoFocus
              value={user}
              onChange={(e) => setUser(e.target.value)}
            />
          </>
        )}
        <label htmlFor="secret">{mode === "password" ? "Password" : "API token"}</label>
        <input
          id="secret"
          type="password"
          autoComplete="current-password"
          value={secret}
          onChange={(e) => setSecret(e.target.value)}
          placeholder={mode === "token" ? "the token from `make run` or `porpoise token create`" : ""}
        />
        <button type="submit" disabled={busy || !ready}>
          Sign in
        </button>
        <ErrorBox error={error} title="Sign-in failed" />
        <p className="hint">
          {mode === "password"
            ? "A session cookie for this browser; changes also need this tab's CSRF token."
            : "The token is kept for this browser tab only."}
        </p>
        <p className="hint" data-testid="first-sign-in">
          {TEXT.firstTime}
        </p>
      </form>
    </main>
  );
}
