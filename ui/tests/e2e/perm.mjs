// A read-only user's day in real headless Chromium (issue 28): started by tests/test_ui_e2e.py, which seeds,
// through the API, a project with a SWITCH workflow run once (one branch skipped), a task retried once, a backfill
// run for a business date, a task with a Spark application and one whose log is gone, and a user granted READ
// on that project. Signed in with a password, the user sees who they are, no Admin tab, every action they may
// not take disabled with the reason, the instance page's numbers and skipped rows, the run type and business
// date, each attempt's log, the Spark application; then changes their own password and signs in with it.
// Environment: PORPOISE_URL, E2E_USER, E2E_PASSWORD, E2E_PROJECT, E2E_WORKFLOW, E2E_SWITCH_INSTANCE,
// E2E_BACKFILL_INSTANCE, E2E_RETRIED_TASK, E2E_FIRST_ATTEMPT, E2E_NO_LOG_TASK, E2E_APP_TASK, E2E_APP_ID,
// E2E_SCREENSHOTS (optional), CHROMIUM.
import { join } from "node:path";
import { violations } from "./a11y.mjs";
import { launch, reportFailure } from "./browser.mjs";

const env = process.env;
const url = env.PORPOISE_URL;
const project = env.E2E_PROJECT;
const reason = `needs EXECUTE on project ${project}`;
const { page, close } = await launch();
page.setDefaultTimeout(60_000);
const pageErrors = [];
page.on("pageerror", (err) => pageErrors.push(String(err)));
// the console's errors are shown with a failure (refusals this run provokes log some: 403, 404)
const consoleErrors = [];
page.on("console", (m) => {
  if (m.type() === "error") consoleErrors.push(`console: ${m.text()}`);
});
page.on("dialog", (dialog) => void dialog.accept()); // leaving the editor with a typed project name
const follows = [];
page.on("request", (r) => {
  if (r.url().includes("/log/follow")) follows.push(r.url());
});
const a11y = [];
const audit = async (name, route) => a11y.push(...(await violations(page, name, route)));
const shot = async (name) => {
  if (env.E2E_SCREENSHOTS) await page.screenshot({ path: join(env.E2E_SCREENSHOTS, `${name}.png`) });
};
/** The button ``name`` is disabled and says ``why`` on hover. */
const refused = async (scope, name, why) => {
  const button = scope.getByRole("button", { name, exact: true });
  await button.waitFor();
  if (!(await button.isDisabled())) throw new Error(`${name} is enabled for a read-only user`);
  const title = await button.getAttribute("title");
  if (title !== why) throw new Error(`${name} says ${JSON.stringify(title)}, not ${JSON.stringify(why)}`);
};
const signIn = async (user, password, next) => {
  await page.goto(`${url}/signin?next=${encodeURIComponent(next)}`);
  await page.getByLabel("User").fill(user);
  await page.getByLabel("Password").fill(password);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.waitForURL((u) => u.pathname === next);
};
let step = "start";

try {
  step = "sign in with a password: the header says who is signed in; no Admin tab";
  await signIn(env.E2E_USER, env.E2E_PASSWORD, `/workflows/${env.E2E_WORKFLOW}`);
  await page.getByTestId("signed-in-as").filter({ hasText: env.E2E_USER }).waitFor();
  const nav = page.getByRole("navigation", { name: "Main" });
  await nav.getByRole("link", { name: "Workflows" }).waitFor();
  if (await nav.getByRole("link", { name: "Admin" }).count()) throw new Error("the Admin tab shows");
  await nav.getByRole("link", { name: "My tokens" }).waitFor(); // their own tokens stay reachable

  step = "the workflow's actions are disabled with the right they need";
  await refused(page, "Start…", reason);
  await refused(page, "Backfill…", reason);
  await refused(page, "Take offline", `needs WRITE on project ${project}`);
  await refused(page, "Edit", `needs WRITE on project ${project}`);
  await refused(page.getByTestId("schedules"), "New schedule", `needs WRITE on project ${project}`);
  await page.getByTestId("rights-note").filter({ hasText: reason }).waitFor();
  await audit("workflow (read-only)", "workflows/:code");

  step = "the Admin page typed in says only admins";
  await page.goto(`${url}/admin`);
  await page.getByRole("alert").filter({ hasText: "only an admin may do this" }).waitFor();
  if (await page.getByRole("button", { name: "Create user" }).count()) throw new Error("admin forms show");

  step = "the instance: tasks counted once, the branch not taken skipped in the table and the graph";
  await page.goto(`${url}/instances/${env.E2E_SWITCH_INSTANCE}`);
  await page.getByTestId("tasks-finished").filter({ hasText: "7 of 7 finished, 2 skipped" }).waitFor();
  for (const name of ["right", "below_right"]) {
    await page.getByTestId(`task-${name}`).filter({ hasText: "skipped" }).waitFor();
    await page.locator(`[data-testid="node-${name}"][data-state="SKIPPED"]`).waitFor();
  }
  await page.locator('[data-testid="node-left"][data-state="SUCCESS"]').waitFor();
  await page.getByTestId("run-type").filter({ hasText: "manual" }).waitFor();
  await refused(page.getByRole("group", { name: "Instance actions" }), "Rerun", reason);
  await audit("instance (read-only)", "instances/:id");
  await shot("instance-skipped");

  step = "the instance list: run type and business date tell the backfill run apart";
  await page.goto(`${url}/instances?workflow=${env.E2E_BACKFILL_WORKFLOW}`);
  const row = page.getByTestId(`instance-${env.E2E_BACKFILL_INSTANCE}`);
  await row.getByTestId("run-type").filter({ hasText: "backfill" }).waitFor();
  await row.filter({ hasText: "3/1/2026, 00:00:00" }).waitFor();
  await audit("instances", "instances");
  await shot("instances-run-types");
  await row.getByRole("link").first().click();
  await page.getByTestId("business-date").filter({ hasText: "3/1/2026, 00:00:00" }).waitFor();
  await page.getByTestId("run-type").filter({ hasText: "backfill" }).waitFor();

  step = "a workflow code that is not a number: said at the field, not sent as NaN";
  await page.goto(`${url}/instances?workflow=abc`);
  await page.getByRole("alert").filter({ hasText: "a workflow code is a number" }).waitFor();
  if (await page.getByText("NaN").count()) throw new Error("NaN on the page");
  const stateOptions = await page.getByLabel("Filter by state").locator("option").allTextContents();
  if (stateOptions.some((o) => /_/.test(o))) throw new Error(`raw enums in the filter: ${stateOptions}`);

  step = "an address with a word where the code belongs: said so, no NaN";
  await page.goto(`${url}/workflows/abc`);
  await page.getByRole("alert").filter({ hasText: "“abc” is not a workflow number" }).waitFor();
  if (await page.getByText("NaN").count()) throw new Error("NaN on the page");

  step = "a project name that matches none: the editor says saving creates it";
  await page.goto(`${url}/workflows/new`);
  await page.locator("#wf-project").fill(`${project}x`);
  await page
    .getByTestId("new-project-hint")
    .filter({ hasText: `No project “${project}x”` })
    .waitFor();
  await page.locator("#wf-project").fill(project);
  await page.getByTestId("new-project-hint").waitFor({ state: "detached" });

  step = "a retried task: one log tab per attempt, attempt 1 reachable";
  await page.goto(`${url}/tasks/${env.E2E_RETRIED_TASK}/log`);
  const tabs = page.getByRole("navigation", { name: "Attempts" });
  await tabs.getByRole("link", { name: /Attempt 2/ }).waitFor();
  await tabs.getByRole("link", { name: /Attempt 1/ }).click();
  await page.waitForURL(new RegExp(`/tasks/${env.E2E_FIRST_ATTEMPT}/log$`));
  await page.getByTestId("log").getByText("failing on purpose", { exact: true }).waitFor();
  await audit("log (attempts)", "tasks/:id/log");
  await shot("log-attempts");

  step = "the Spark application of a task: its id and a link to its UI";
  await page.goto(`${url}/tasks/${env.E2E_APP_TASK}/log`);
  const app = page.getByTestId("task-app");
  await app.filter({ hasText: env.E2E_APP_ID }).waitFor();
  const href = await app.getByRole("link", { name: "open its UI" }).getAttribute("href");
  if (href !== env.E2E_APP_LINK) throw new Error(`the application link is ${href}`);

  step = "a task without a log: says so once, and follows nothing";
  follows.length = 0;
  await page.goto(`${url}/tasks/${env.E2E_NO_LOG_TASK}/log`);
  await page.getByRole("alert").filter({ hasText: "has no log" }).waitFor();
  await page.getByTestId("log-status").filter({ hasText: "no log" }).waitFor();
  if ((await page.getByTestId("log-status").innerText()).includes("still writing"))
    throw new Error("a missing log says the task is still writing");
  if (follows.length) throw new Error(`the page followed a missing log: ${follows.join(", ")}`);

  step = "my API tokens (a user who is not an admin)";
  await page.goto(`${url}/tokens`);
  await page.getByRole("heading", { name: "My API tokens" }).waitFor();
  await audit("my tokens", "tokens");
  await shot("tokens");

  step = "change my own password (the current one is asked), then sign in with the new one";
  await page.getByRole("button", { name: "Change password" }).click();
  const dialog = page.getByRole("dialog", { name: "Change your password" });
  await dialog.getByLabel("Current password").fill("not-my-password");
  await dialog.getByLabel("New password", { exact: true }).fill("a-new-password-1");
  await dialog.getByLabel("New password again").fill("a-new-password-1");
  await dialog.getByRole("button", { name: "Change" }).click();
  await dialog.getByRole("alert").filter({ hasText: "the old password is wrong" }).waitFor();
  await dialog.getByLabel("Current password").fill(env.E2E_PASSWORD);
  await dialog.getByRole("button", { name: "Change" }).click();
  await dialog.getByRole("status").filter({ hasText: "Password changed" }).waitFor();
  await audit("change password", "tokens");
  await shot("change-password");
  await dialog.getByRole("button", { name: "Sign out" }).click();
  await page.waitForURL(/\/signin/);
  await signIn(env.E2E_USER, "a-new-password-1", "/instances");
  await page.getByTestId("signed-in-as").filter({ hasText: env.E2E_USER }).waitFor();

  if (a11y.length) throw new Error(`accessibility violations:\n${a11y.join("\n")}`);
  if (pageErrors.length) throw new Error(`uncaught page errors: ${pageErrors.join("; ")}`);
  console.log("perm: all steps passed");
} catch (err) {
  await reportFailure("perm", page, step, err, [...pageErrors, ...consoleErrors]);
} finally {
  await close();
}
