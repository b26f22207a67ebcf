import { describe, expect, it } from "vitest";

import { branchLabels, missingLinks, switchOf, withSwitch } from "./switchParams";

describe("switchParams", () => {
  it("reads and writes the stored shape, keeping the other params", () => {
    const params = { cases: [{ condition: "1 == 1", next: "a" }], default: "b", localParams: [] };
    const sw = switchOf(params);
    expect(sw).toEqual({ cases: [{ condition: "1 == 1", next: "a" }], default: "b" });
    expect(withSwitch(params, { ...sw, default: undefined })).toEqual({
      cases: [{ condition: "1 == 1", next: "a" }],
      localParams: [],
    });
    expect(switchOf(undefined)).toEqual({ cases: [], default: undefined });
  });

  it("names the branch tasks not linked below the SWITCH yet", () => {
    const tasks = [
      { name: "s", type: "SWITCH" },
      { name: "a", type: "SHELL", upstream: "s" },
      { name: "b", type: "SHELL" },
      { name: "c", type: "SHELL" },
    ];
    expect(missingLinks("s", { cases: [{ condition: "x", next: "a" }], default: "b" }, tasks)).toEqual(["b"]);
  });

  it("labels each branch's edge with its condition, the default with 'default'", () => {
    const long = "'${env}' == 'production-and-some-more-text'";
    const labels = branchLabels([
      {
        name: "s",
        type: "SWITCH",
        params: {
          cases: [
            { condition: "${n} > 1", next: "a" },
            { condition: long, next: "c" },
          ],
          default: "b",
        },
      },
      { name: "a", type: "SHELL", upstream: "s" },
    ]);
    expect(labels.get("s->a")).toBe("${n} > 1");
    expect(labels.get("s->b")).toBe("default");
    expect(labels.get("s->c")?.endsWith("…")).toBe(true);
    expect(labels.get("s->c")?.length).toBe(32);
  });
});
