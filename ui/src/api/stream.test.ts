import { afterEach, describe, expect, it, vi } from "vitest";

import { openStream, parseSse } from "./stream";

describe("parseSse", () => {
  it("splits complete events and keeps the unfinished tail", () => {
    const { events, rest } = parseSse(
      "id: a.1\nevent: states\ndata: [1]\n\n: ping\n\nevent: hello\ndata: {}\n\nid: a.2\nda",
    );
    expect(events).toEqual([
      { event: "states", id: "a.1", data: "[1]" },
      { event: "hello", id: null, data: "{}" },
    ]);
    expect(rest).toBe("id: a.2\nda");
  });

  it("joins multi-line data, accepts CRLF and a missing space after the colon", () => {
    const { events } = parseSse("data:one\r\ndata: two\r\n\r\n");
    expect(events).toEqual([{ event: "message", id: null, data: "one\ntwo" }]);
  });

  it("an event cut across two chunks is parsed once it completes", () => {
    const first = parseSse("event: states\ndata: [");
    expect(first.events).toEqual([]);
    const second = parseSse(first.rest + "2]\n\n");
    expect(second.events).toEqual([{ event: "states", id: null, data: "[2]" }]);
  });
});

/** A fake server of the stream: each request answers the next of ``answers`` (a status and the chunks of its
 * body, the body ending = the connection dropped), and records the request's headers. */
function fakeServer(answers: { status: number; chunks?: string[] }[]) {
  const requests: { url: string; headers: Headers }[] = [];
  const asked: (() => void)[] = [];
  const fetchStub = (input: RequestInfo | URL, init?: RequestInit) => {
    requests.push({ url: String(input), headers: new Headers(init?.headers) });
    asked.shift()?.();
    const answer = answers.shift();
    if (!answer) return new Promise<Response>(() => {}); // no more answers: the request hangs
    const encoder = new TextEncoder();
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        for (const chunk of answer.chunks ?? []) controller.enqueue(encoder.encode(chunk));
        controller.close();
      },
    });
    return Promise.resolve(new Response(body, { status: answer.status }));
  };
  /** Resolves when request number ``n`` (1-based) has been made. */
  const request = (n: number) =>
    new Promise<void>((resolve) => {
      if (requests.length >= n) resolve();
      else asked.push(() => (requests.length >= n ? resolve() : void request(n).then(resolve)));
    });
  return { requests, request, fetchStub };
}

describe("openStream", () => {
  afterEach(() => {
    vi.useRealTimers();
    vi.unstubAllGlobals();
  });

  it("a stream that drops reconnects, resuming from the last event id, and reports its state", async () => {
    const server = fakeServer([
      {
        status: 200,
        chunks: ["id: a.1\nevent: states\ndata: [1]\n\n", "id: a.2\nevent: sta", "tes\ndata: [2]\n\n"],
      },
      { status: 503 },
      { status: 200, chunks: ["id: a.3\nevent: states\ndata: [3]\n\n"] },
    ]);
    vi.stubGlobal("fetch", server.fetchStub);
    const events: string[] = [];
    const status: boolean[] = [];
    let from = 0;
    const stream = openStream({
      url: () => `/events?from=${(from += 1)}`,
      headers: () => ({ Authorization: "Bearer t" }),
      onEvent: (e) => events.push(`${e.id}:${e.data}`),
      onStatus: (ok) => status.push(ok),
      onUnauthorized: () => events.push("unauthorized"),
    });
    await server.request(4); // the fourth request hangs: the stream stays connecting
    stream.close();
    expect(events).toEqual(["a.1:[1]", "a.2:[2]", "a.3:[3]"]);
    expect(status).toEqual([true, false, false, true, false]);
    expect(server.requests.map((r) => r.url)).toEqual([
      "/events?from=1",
      "/events?from=2",
      "/events?from=3",
      "/events?from=4",
    ]);
    expect(server.requests.map((r) => r.headers.get("Last-Event-ID"))).toEqual([null, "a.2", "a.2", "a.3"]);
    expect(server.requests.every((r) => r.headers.get("Authorization") === "Bearer t")).toBe(true);
  });

  it("a 401 stops the stream: the owner hears it, no reconnection", async () => {
    const server = fakeServer([{ status: 401 }]);
    vi.stubGlobal("fetch", server.fetchStub);
    vi.useFakeTimers({ toFake: ["setTimeout"] }); // a reconnection would be a timer set
    const heard = new Promise<void>((resolve) =>
      openStream({
        url: "/events",
        headers: () => ({}),
        onEvent: () => {},
        onStatus: () => {},
        onUnauthorized: resolve,
      }),
    );
    await heard;
    await Promise.resolve();
    expect(vi.getTimerCount()).toBe(0);
    vi.useRealTimers();
    expect(server.requests).toHaveLength(1);
  });
});
