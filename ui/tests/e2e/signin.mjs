// The first sign-in to a fresh standalone (issue 28 item 1), in real headless Chromium: the sign-in page says
// where the first password is, and the password the standalone's banner printed signs user admin in.
// Started by tests/test_ui_e2e.py with PORPOISE_URL, E2E_PASSWORD (from the banner), E2E_SCREENSHOTS
// (optional), CHROMIUM.
import { join } from "node:path";
import { violations } from "./a11y.mjs";
import { launch, reportFailure } from "./browser.mjs";

const url = process.env.PORPOISE_URL;
const { page, close } = await launch();
page.setDefaultTimeout(60_000);
let step = "start";
try {
  step = "the sign-in page says how to sign in the first time";
  await page.goto(`${url}/overview`);
  await page.waitForURL(/\/signin\?next=/);
  await page.getByTestId("first-sign-in").filter({ hasText: "first password in its start banner" }).waitFor();
  const found = await violations(page, "signin", "/signin");
  if (found.length) throw new Error(found.join("\n"));
  if (process.env.E2E_SCREENSHOTS)
    await page.screenshot({ path: join(process.env.E2E_SCREENSHOTS, "signin-first.png") });

  step = "user admin with the banner's password signs in; the header says so, with the Admin tab";
  await page.getByLabel("User").fill("admin");
  await page.getByLabel("Password").fill(process.env.E2E_PASSWORD);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.waitForURL(/\/overview$/);
  await page.getByTestId("signed-in-as").filter({ hasText: "admin (admin)" }).waitFor();
  await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Admin" }).waitFor();
  console.log("signin: all steps passed");
} catch (err) {
  await reportFailure("signin", page, step, err);
} finally {
  await close();
}
