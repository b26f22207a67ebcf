import { afterEach, describe, expect, it, vi } from "vitest";

import { ApiError, token } from "./client";
import { downloadWithToken } from "./download";

afterEach(() => {
  vi.unstubAllGlobals();
  vi.restoreAllMocks();
  token.clear();
});

describe("downloadWithToken", () => {
  it("fetches the file with the token and hands it to the browser under its name", async () => {
    token.set("t1");
    const asked: Headers[] = [];
    vi.stubGlobal("fetch", (_url: string, init?: RequestInit) => {
      asked.push(new Headers(init?.headers));
      return Promise.resolve(new Response("line 1\n", { status: 200 }));
    });
    const saved: string[] = [];
    vi.spyOn(HTMLAnchorElement.prototype, "click").mockImplementation(function (this: HTMLAnchorElement) {
      saved.push(this.download);
    });
    await downloadWithToken("/api/v1/tasks/7/log/download", "task-7.log");
    expect(asked.map((h) => h.get("Authorization"))).toEqual(["Bearer t1"]);
    expect(saved).toEqual(["task-7.log"]);
  });

  it("a refusal is an ApiError with the server's message, and nothing is saved", async () => {
    vi.stubGlobal("fetch", () =>
      Promise.resolve(
        new Response(JSON.stringify({ error: { message: "no log for task 7" } }), {
          status: 404,
          headers: { "Content-Type": "application/json" },
        }),
      ),
    );
    const click = vi.spyOn(HTMLAnchorElement.prototype, "click");
    await expect(downloadWithToken("/x", "x.log")).rejects.toEqual(new ApiError(404, "no log for task 7"));
    expect(click).not.toHaveBeenCalled();
  });
});
