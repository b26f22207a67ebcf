import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

const css = readFileSync(join(__dirname, "styles.css"), "utf8");

/** The value of ``property`` in the rule whose selector is exactly ``selector`` (the last such rule wins). */
function declared(selector: string, property: string): string | undefined {
  const rules = [...css.matchAll(/([^{}]+)\{([^}]*)\}/g)].filter((m) =>
    (m[1] ?? "")
      .split(",")
      .map((s) => s.trim())
      .includes(selector),
  );
  const values = rules.flatMap((m) =>
    [...(m[2] ?? "").matchAll(new RegExp(`(?:^|;|\\s)${property}\\s*:\\s*([^;]+)`, "g"))].map((d) =>
      (d[1] ?? "").trim(),
    ),
  );
  return values.at(-1);
}

/** WCAG 2's relative luminance of a #rrggbb colour. */
function luminance(hex: string): number {
  const [r = 0, g = 0, b = 0] = [1, 3, 5].map((i) => {
    const c = parseInt(hex.slice(i, i + 2), 16) / 255;
    return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
  });
  return 0.2126 * r + 0.7152 * g + 0.0722 * b;
}

function contrast(a: string, b: string): number {
  const [hi = 0, lo = 0] = [luminance(a), luminance(b)].sort((x, y) => y - x);
  return (hi + 0.05) / (lo + 0.05);
}

describe("the log page's line numbers", () => {
  const background = declared(".log", "background") ?? "";
  const hitBackground = declared(".logline.hit", "background") ?? "";
  const number = declared(".lineno", "color") ?? "";
  const hitNumber = declared(".logline.hit .lineno", "color") ?? number;

  it("are at WCAG AA contrast (4.5:1) on the log", () => {
    expect(contrast(number, background)).toBeGreaterThanOrEqual(4.5);
  });

  it("are at WCAG AA contrast on a search hit's line", () => {
    expect(contrast(hitNumber, hitBackground)).toBeGreaterThanOrEqual(4.5);
  });
});
