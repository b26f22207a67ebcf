// Accessibility checks with axe-core (injected into the page; no network): the WCAG 2 A / AA rules, and a
// page fails on any violation axe rates serious or critical.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";

const source = readFileSync(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8");

/** The serious and critical violations on the page as it is now, one line each ("" when none). */
export async function violations(page, name) {
  // evaluated through the DevTools protocol: an inline <script> tag would be refused by the UI's
  // Content-Security-Policy (script-src 'self')
  if (!(await page.evaluate(() => "axe" in window))) await page.evaluate(source);
  const result = await page.evaluate(() =>
    window.axe.run(document, {
      resultTypes: ["violations"],
      runOnly: { type: "tag", values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"] },
    }),
  );
  return result.violations
    .filter((v) => v.impact === "serious" || v.impact === "critical")
    .map(
      (v) =>
        `${name}: ${v.id} (${v.impact}) ${v.help} at ${v.nodes
          .slice(0, 3)
          .map((n) => n.target.join(" "))
          .join(", ")}`,
    );
}
