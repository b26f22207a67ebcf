// Alert groups and the alert history in real headless Chromium against a live API server: create a group with a
// Slack sender (the server's refusal of a bad URL shown at the field first), edit it (the stored webhook shows
// as "***" and is kept), send a test alert and see "sent", then the Alerts screen: a failed alert with the
// receiver's answer, the status filter in the URL, Resend. axe-core on both screens.
// Environment: PORPOISE_URL, E2E_USER / E2E_PASSWORD (an admin), E2E_TAG, E2E_WEBHOOK (a loopback Slack
// receiver answering "ok"), E2E_ALERT (a failed alert's id), E2E_SCREENSHOTS (optional), CHROMIUM.
import { join } from "node:path";
import { violations } from "./a11y.mjs";
import { launch, reportFailure } from "./browser.mjs";

const url = process.env.PORPOISE_URL;
const group = `e2e_alerts_${process.env.E2E_TAG}`;
const alertId = process.env.E2E_ALERT;
const shots = process.env.E2E_SCREENSHOTS;
const { page, close } = await launch();
page.setDefaultTimeout(60_000);
const pageErrors = [];
page.on("pageerror", (err) => pageErrors.push(String(err)));
const a11y = [];
const shot = async (name) => {
  if (shots) await page.screenshot({ path: join(shots, `${name}.png`), fullPage: true });
};
let step = "start";

try {
  step = "sign in and open the alert groups";
  await page.goto(`${url}/signin?next=${encodeURIComponent("/admin?tab=alerts")}`);
  await page.getByLabel("User").fill(process.env.E2E_USER);
  await page.getByLabel("Password").fill(process.env.E2E_PASSWORD);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByTestId("admin-alert-groups").waitFor();

  step = "a new group with a Slack sender: the server's refusal of a bad URL at the field";
  await page.getByRole("button", { name: "New alert group" }).click();
  await page.getByLabel("Alert group name").fill(group);
  await page.getByRole("button", { name: "Add sender" }).click();
  await page.getByLabel("Sender 1 Channel type").selectOption("SLACK");
  await page.getByLabel("Sender 1 Sender name").fill("slack");
  const hook = page.getByLabel("Sender 1 webHook");
  if ((await hook.getAttribute("type")) !== "password")
    throw new Error("the webhook (a secret) is not a password");
  await hook.fill("ftp://127.0.0.1/nope");
  await page.getByRole("button", { name: "Create alert group" }).click();
  await page.getByTestId("sender-0").getByRole("alert").filter({ hasText: "http:// or https://" }).waitFor();
  if ((await hook.getAttribute("aria-invalid")) !== "true")
    throw new Error("the refused field is not marked");
  await hook.fill(process.env.E2E_WEBHOOK);
  await page.getByRole("button", { name: "Create alert group" }).click();
  const row = page.getByTestId(`alert-group-${group}`);
  await row.filter({ hasText: "slack (SLACK)" }).waitFor();

  step = "edit: the stored webhook shows as *** and is kept; a username is added";
  await row.getByRole("button", { name: "Edit" }).click();
  const stored = page.getByLabel("Sender 1 webHook");
  if ((await stored.inputValue()) !== "***")
    throw new Error(`the stored webhook shows ${await stored.inputValue()}`);
  await page.getByLabel("Sender 1 username").fill("porpoise-e2e");
  await page.getByRole("button", { name: "Save" }).click();
  await page.getByRole("button", { name: "Save" }).waitFor({ state: "detached" });

  step = "send a test alert: the Slack sender reports sent";
  await row.getByRole("button", { name: "Send test alert" }).click();
  await row.getByTestId("outcome-slack").filter({ hasText: "sent" }).waitFor();
  a11y.push(...(await violations(page, "alert groups", "admin")));
  await row.getByRole("button", { name: "Edit" }).click();
  await shot("alert-groups");
  await page.getByRole("button", { name: "Cancel" }).click();

  step = "the Alerts screen: a failed alert with the receiver's answer";
  await page.getByRole("link", { name: "Alerts" }).click();
  await page.waitForURL(/\/alerts$/);
  const alert = page.getByTestId(`alert-${alertId}`);
  await alert.filter({ hasText: "failed — slack refused the message: HTTP 500" }).waitFor();
  a11y.push(...(await violations(page, "alerts", "alerts")));
  await shot("alerts");

  step = "filter by status (kept in the URL), then resend";
  await page.getByLabel("Status").selectOption("EXECUTION_FAILURE");
  await page.waitForURL(/status=EXECUTION_FAILURE/);
  await alert.waitFor();
  await alert.getByRole("button", { name: "Resend" }).click();
  await page
    .getByRole("status")
    .filter({ hasText: `Alert ${alertId} queued again` })
    .waitFor();

  if (a11y.length) throw new Error(`accessibility violations:\n${a11y.join("\n")}`);
  if (pageErrors.length) throw new Error(`uncaught page errors: ${pageErrors.join("; ")}`);
  console.log("alerts: all steps passed");
} catch (err) {
  await reportFailure("alerts", page, step, err, pageErrors);
} finally {
  await close();
}
