import { render } from "@testing-library/react";
import { describe, expect, it } from "vitest";

import { StateBadge } from "./StateBadge";

describe("StateBadge", () => {
  it("never tells a state by colour alone: a symbol and a word for each", () => {
    const states = [
      "SUCCESS",
      "FAILURE",
      "RUNNING_EXECUTION",
      "SUBMITTED_SUCCESS",
      "STOP",
      "PAUSE",
      "KILL",
      "DISABLED",
    ];
    const texts = states.map((s) => render(<StateBadge state={s} />).container.textContent ?? "");
    for (const text of texts) expect(text).toMatch(/^\S \S/);
    expect(new Set(texts).size).toBe(states.length);
    expect(texts[0]).toBe("✓ success");
    expect(texts[1]).toBe("✕ failure");
  });
});
