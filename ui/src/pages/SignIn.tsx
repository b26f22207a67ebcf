import { useState, type FormEvent } from "react";
import { useNavigate, useSearchParams } from "react-router";

import { api, call, token } from "../api/client";
import { ErrorBox } from "../components/ErrorBox";

/** Sign in with an API token (porpoise token create, or the one `make run` prints) until users exist. */
export function SignIn() {
  const [value, setValue] = useState("");
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const navigate = useNavigate();
  const [params] = useSearchParams();

  const submit = async (event: FormEvent) => {
    event.preventDefault();
    setBusy(true);
    setError(null);
    token.set(value.trim());
    try {
      await call(api.GET("/api/v1/tokens", { params: { query: { size: 1 } } }));
      navigate(params.get("next") || "/instances", { replace: true });
    } catch (exc) {
      token.clear();
      setError(exc);
    } finally {
      setBusy(false);
    }
  };

  return (
    <main className="signin">
      <h1>Porpoise</h1>
      <form onSubmit={submit} aria-label="Sign in">
        <label htmlFor="token">API token</label>
        <input
          id="token"
          type="password"
          autoComplete="current-password"
          autoFocus
          value={value}
          onChange={(e) => setValue(e.target.value)}
          placeholder="the token from `make run` or `porpoise token create`"
        />
        <button type="submit" disabled={busy || !value.trim()}>
          Sign in
        </button>
        <ErrorBox error={error} title="Sign-in failed" />
        <p className="hint">The token is kept for this browser tab only.</p>
      </form>
    </main>
  );
}
