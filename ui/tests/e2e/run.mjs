// End-to-end run in real headless Chromium (Debian's package) against a live API server.
// Started by tests/test_ui_e2e.py, which starts the cluster and passes, in the environment:
//   PORPOISE_URL, PORPOISE_TOKEN, E2E_TAG (unique suffix for names), E2E_LONG_INSTANCE (a running
//   instance to stop), E2E_FAILED_INSTANCE (a failed instance whose task succeeds when run again),
//   E2E_SCREENSHOTS (directory, optional)
// Exit 0 when every step passed; otherwise the failing step and the page's text are printed.
import { join } from "node:path";
import { launch } from "./browser.mjs";

const url = process.env.PORPOISE_URL;
const token = process.env.PORPOISE_TOKEN;
const tag = process.env.E2E_TAG;
const failedInstance = process.env.E2E_FAILED_INSTANCE;
const longInstance = process.env.E2E_LONG_INSTANCE;
const shots = process.env.E2E_SCREENSHOTS;
const TIMEOUT = 60_000;

const { page, close } = await launch();

page.setDefaultTimeout(TIMEOUT);
const consoleErrors = [];
page.on("pageerror", (err) => consoleErrors.push(String(err)));

let step = "start";
const shot = async (name) => {
  if (shots) await page.screenshot({ path: join(shots, `${name}.png`) });
};

try {
  step = "a page needing sign-in sends to the sign-in page";
  await page.goto(`${url}/instances`);
  await page.waitForURL(/\/signin\?next=/);

  step = "a wrong token shows the server's message";
  await page.getByLabel("API token").fill("not-a-token");
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("alert").filter({ hasText: "invalid or expired API token" }).waitFor();
  await shot("signin");

  step = "sign in with the token";
  await page.getByLabel("API token").fill(token);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.waitForURL(/\/instances$/);
  await page.getByTestId("instances").waitFor();

  step = "overview";
  await page.goto(`${url}/overview`);
  await page.getByTestId("recent-failures").waitFor();
  await shot("overview");

  step = "create a workflow in the editor (YAML), its graph drawn as typed";
  await page.goto(`${url}/workflows/new`);
  await page
    .getByTestId("editor-text")
    .fill(
      [
        `name: ui_${tag}`,
        "project: ui-e2e",
        "tasks:",
        "  - name: a",
        "    type: SHELL",
        "    params:",
        '      rawScript: "echo start of a; sleep 3; echo done with a"',
        "  - name: b",
        "    type: SHELL",
        "    upstream: [a]",
        "    params:",
        "      rawScript: echo b",
        "",
      ].join("\n"),
    );
  await page.getByTestId("node-b").waitFor();
  await shot("editor");
  await page.getByRole("button", { name: "Save as new version" }).click();
  await page.waitForURL(/\/workflows\/\d+$/);
  await page.getByTestId("node-a").waitFor();

  step = "edit a schedule: next fire times as you type";
  await page.getByRole("button", { name: "New schedule" }).click();
  await page.getByLabel("Crontab").fill("30 4 * * *");
  await page
    .getByTestId("next-fires")
    .getByText(/04:30:00/)
    .first()
    .waitFor();
  await page.getByLabel("Crontab").fill("30 4 * *");
  await page.getByTestId("next-fires").getByRole("alert").waitFor();
  await page.getByLabel("Crontab").fill("15 6 * * *");
  await page
    .getByTestId("next-fires")
    .getByText(/06:15:00/)
    .first()
    .waitFor();
  await page.getByRole("button", { name: "Save" }).click();
  await page.getByTestId("schedules").getByText("15 6 * * *").waitFor();

  step = "put it online";
  await page.getByRole("button", { name: "Put online" }).click();
  await page.getByRole("button", { name: "Take offline" }).waitFor();
  await shot("workflow");

  step = "start it from the page: it opens the new instance";
  await page.getByRole("button", { name: "Start…" }).click();
  await page.getByRole("button", { name: "Start now" }).click();
  await page.waitForURL(/\/instances\/\d+$/);

  step = "watch task a run, then the graph turn green (live, no reload)";
  await page.locator('[data-testid="node-a"][data-state="RUNNING_EXECUTION"]').waitFor();
  await page.locator('[data-testid="node-b"][data-state="SUCCESS"]').waitFor();
  await page.locator('[data-testid="node-a"][data-state="SUCCESS"]').waitFor();
  await page.locator('.pagehead [data-state="SUCCESS"]').waitFor();
  // times come with the refetch that follows a state change
  await page.getByTestId("task-b").filter({ hasNotText: "—" }).waitFor();
  await shot("instance");

  step = "open task a's log from the graph";
  await page.getByTestId("node-a").click();
  await page.getByTestId("selected-task").getByRole("link", { name: "open log" }).click();
  await page.waitForURL(/\/tasks\/\d+\/log$/);
  await page.getByTestId("log").getByText("done with a").waitFor();
  await page.getByTestId("log-status").filter({ hasText: "(complete)" }).waitFor();
  await shot("log");

  step = "stop a running instance; the state shows stopped";
  await page.goto(`${url}/instances/${longInstance}`);
  await page.locator('.pagehead [data-state="RUNNING_EXECUTION"]').waitFor();
  await page.getByRole("button", { name: "Stop" }).click();
  await page.locator('.pagehead [data-state="STOP"]').waitFor();

  step = "a refused batch action shows the server's 409 reason";
  await page.goto(`${url}/instances`);
  await page.getByTestId(`instance-${longInstance}`).getByRole("checkbox").check();
  await page.getByRole("button", { name: "Stop" }).click();
  await page.getByTestId("batch-report").filter({ hasText: "cannot stop workflow instance" }).waitFor();
  await shot("instances");

  step = "see a failure on the overview, its task's log one click away, and recover it";
  await page.goto(`${url}/overview`);
  await page
    .getByTestId("recent-failures")
    .getByRole("link", { name: "log of failed task flaky" })
    .first()
    .click();
  await page.getByTestId("log").getByText("failing on purpose").waitFor();
  await page.goto(`${url}/instances/${failedInstance}`);
  await page.locator('.pagehead [data-state="FAILURE"]').waitFor();
  await page.getByRole("button", { name: "Recover failed" }).click();
  await page.locator('.pagehead [data-state="SUCCESS"]').waitFor();
  await page.locator('[data-testid="node-flaky"][data-state="SUCCESS"]').waitFor();

  step = "workflows list and cluster";
  await page.goto(`${url}/workflows`);
  await page.getByTestId("workflows").waitFor();
  await shot("workflows");
  await page.goto(`${url}/cluster`);
  await page.getByRole("heading", { name: /Workers \(\d+\)/ }).waitFor();
  await shot("cluster");

  step = "unknown page: a message, not a blank page";
  await page.goto(`${url}/no/such/page`);
  await page.getByRole("heading", { name: "Nothing here" }).waitFor();

  if (consoleErrors.length) throw new Error(`uncaught page errors: ${consoleErrors.join("; ")}`);
  console.log("e2e: all steps passed");
} catch (err) {
  console.error(`e2e FAILED at step: ${step}\n${err}`);
  const text = await page
    .locator("body")
    .innerText()
    .catch(() => "(no page)");
  console.error(`page ${page.url()}:\n${text.slice(0, 2000)}`);
  if (consoleErrors.length) console.error(`page errors: ${consoleErrors.join("; ")}`);
  process.exitCode = 1;
} finally {
  await close();
}
