// Headless Chromium (Debian's package) with a fresh profile, as the e2e run and the timings use it.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium } from "playwright-core";

const FLAGS = [
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  "--disable-dev-shm-usage",
];

/** A browser context in a throwaway profile; ``close()`` also removes the profile. */
export async function launch(options = {}) {
  const profile = mkdtempSync(join(tmpdir(), "porpoise-chromium-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
    headless: true,
    viewport: { width: 1400, height: 900 },
    timezoneId: "UTC",
    // the suite run with TLS (PORPOISE_TEST_TLS): the API's certificate comes from the test cluster's CA;
    // accept that key alone, not any certificate error
    args: process.env.E2E_TRUST_SPKI
      ? [...FLAGS, `--ignore-certificate-errors-spki-list=${process.env.E2E_TRUST_SPKI}`]
      : FLAGS,
    ...options,
  });
  const page = context.pages()[0] ?? (await context.newPage());
  const close = async () => {
    await context.close();
    rmSync(profile, { recursive: true, force: true });
  };
  return { context, page, close };
}

/** A run's failure on stderr: the step, the error, the page's address and text, its uncaught errors; the
 * process then exits 1. */
export async function reportFailure(run, page, step, err, pageErrors = []) {
  console.error(`${run} FAILED at step: ${step}\n${err}`);
  const text = await page
    .locator("body")
    .innerText()
    .catch(() => "(no page)");
  console.error(`page ${page.url()}:\n${text.slice(0, 2000)}`);
  if (pageErrors.length) console.error(`page errors: ${pageErrors.join("; ")}`);
  process.exitCode = 1;
}
