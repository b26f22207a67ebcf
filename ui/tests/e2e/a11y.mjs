// Accessibility checks with axe-core (injected into the page; no network): the WCAG 2 A / AA rules, and a
// page fails on any violation axe rates serious or critical. Every audit names the route of
// ui/src/app/router.tsx it audits (its id, the path pattern): src/app/routes.test.tsx fails when a route has
// no audit in these browser tests, and the audit fails when the page is not at that route.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";

const source = readFileSync(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8");

/** The page's address matches ``route`` (a path pattern: "instances/:id"; "*" is any address). */
function at(page, route) {
  if (route === "*") return true;
  const pattern = route
    .replace(/^\//, "")
    .split("/")
    .map((part) => (part.startsWith(":") ? "[^/]+" : part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")))
    .join("/");
  return new RegExp(`(^|/)${pattern}/?$`).test(new URL(page.url()).pathname);
}

/** The serious and critical violations on the page as it is now at ``route`` (router.tsx's id), one line each. */
export async function violations(page, name, route) {
  if (!route || !at(page, route))
    return [`${name}: audited as route ${route} but the page is at ${page.url()}`];
  // evaluated through the DevTools protocol: the app's Content-Security-Policy (script-src 'self') refuses an
  // inline <script>, and must stay on while the page is tested
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
