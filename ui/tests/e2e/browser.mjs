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
    args: FLAGS,
    ...options,
  });
  const page = context.pages()[0] ?? (await context.newPage());
  const close = async () => {
    await context.close();
    rmSync(profile, { recursive: true, force: true });
  };
  return { context, page, close };
}
