import { describe, expect, it } from "vitest";

import { parseSse } from "./stream";

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
