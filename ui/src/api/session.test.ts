import { afterEach, describe, expect, it, vi } from "vitest";

import { ApiError, session, token } from "./client";
import { endSession, signIn } from "./session";

/** A fake API server (installed before the client is made: it keeps the fetch it finds), answering sign-in as
 * engine/api/auth.py does: password "right" for ann, token "good"; it records what it was asked. */
const server = vi.hoisted(() => {
  const asked: { method: string; path: string; headers: Headers; body: string }[] = [];
  const json = (status: number, body: unknown) =>
    new Response(JSON.stringify(body), { status, headers: { "Content-Type": "application/json" } });
  globalThis.fetch = (async (input: RequestInfo | URL, init?: RequestInit) => {
    const request = input instanceof Request ? input : new Request(input, init);
    const path = new URL(request.url).pathname;
    asked.push({ method: request.method, path, headers: request.headers, body: await request.text() });
    if (path === "/api/v1/login") {
      const { user, password } = JSON.parse(asked.at(-1)!.body) as { user: string; password: string };
      return user === "ann" && password === "right"
        ? json(200, { user: "ann", csrf_token: "csrf-1" })
        : json(401, { error: { message: "wrong user name or password" } });
    }
    if (path === "/api/v1/me")
      return request.headers.get("Authorization") === "Bearer good"
        ? json(200, { user: "ann", admin: false, projects: [] })
        : json(401, { error: { message: "invalid token" } });
    if (path === "/api/v1/logout") return json(200, {});
    return json(404, { error: { message: `no route ${path}` } });
  }) as typeof fetch;
  return { asked };
});

afterEach(() => {
  token.clear();
  session.clear();
  server.asked.length = 0;
});

describe("signIn", () => {
  it("with a password keeps the CSRF token the server answered (the session is its cookie)", async () => {
    token.set("stale");
    await signIn({ user: "ann", password: "right" });
    expect(session.csrf()).toBe("csrf-1");
    expect(token.get()).toBeNull();
    expect(server.asked.map((a) => [a.method, a.path, a.headers.get("Authorization")])).toEqual([
      ["POST", "/api/v1/login", null],
    ]);
  });

  it("a refused password keeps nothing and throws the server's message", async () => {
    session.set("old");
    await expect(signIn({ user: "ann", password: "wrong" })).rejects.toEqual(
      new ApiError(401, "wrong user name or password"),
    );
    expect(session.csrf()).toBeNull();
    expect(token.get()).toBeNull();
  });

  it("with a token keeps it once /me accepts it; a refused token is not kept", async () => {
    await signIn({ token: "good" });
    expect(token.get()).toBe("good");
    await expect(signIn({ token: "bad" })).rejects.toHaveProperty("status", 401);
    expect(token.get()).toBeNull();
  });
});

describe("endSession", () => {
  it("ends a cookie session on the server (with its CSRF token) and forgets it", async () => {
    session.set("csrf-1");
    await endSession();
    expect(server.asked.map((a) => [a.path, a.headers.get("X-CSRF-Token")])).toEqual([
      ["/api/v1/logout", "csrf-1"],
    ]);
    expect(session.csrf()).toBeNull();
  });

  it("with a token asks the server nothing and forgets the token", async () => {
    token.set("good");
    await endSession();
    expect(server.asked).toEqual([]);
    expect(token.get()).toBeNull();
  });
});
