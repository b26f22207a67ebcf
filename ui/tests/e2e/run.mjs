// End-to-end run in real headless Chromium (Debian's package) against a live API server.
// Started by tests/test_ui_e2e.py, which starts the cluster and passes, in the environment:
//   PORPOISE_URL, E2E_USER and E2E_PASSWORD (an admin user), E2E_TAG (unique suffix for
//   names), E2E_LONG_INSTANCE (a running instance to stop), E2E_FAILED_INSTANCE (a failed instance whose
//   task succeeds when run again), E2E_SCREENSHOTS (directory, optional)
// To test the lost-connection banner it prints "STOP_API" and waits for a line on stdin (the API server is
// down), then "START_API" and waits again (it is back).
// Exit 0 when every step passed; otherwise the failing step and the page's text are printed.
import { join } from "node:path";
import { createInterface } from "node:readline";
import { violations } from "./a11y.mjs";
import { launch, reportFailure } from "./browser.mjs";

const url = process.env.PORPOISE_URL;
const tag = process.env.E2E_TAG;
const failedInstance = process.env.E2E_FAILED_INSTANCE;
const longInstance = process.env.E2E_LONG_INSTANCE;
const shots = process.env.E2E_SCREENSHOTS;
const user = process.env.E2E_USER;
const password = process.env.E2E_PASSWORD;
const input = createInterface({ input: process.stdin });
const lines = input[Symbol.asyncIterator]();
/** Ask the test driving this run to do something (STOP_API, START_API) and wait until it is done. */
const ask = async (what) => {
  console.log(what);
  await lines.next();
};
const a11y = [];
/** axe-core on the page as it is now; the run fails at the end when any page had a serious violation. */
const audit = async (name, route) => a11y.push(...(await violations(page, name, route)));
const TIMEOUT = 60_000;

const { page, close } = await launch();

page.setDefaultTimeout(TIMEOUT);
const consoleErrors = [];
page.on("pageerror", (err) => consoleErrors.push(String(err)));

let step = "start";

/** In the selected task's side form: rename it and set its script. */
const editTask = async (name, script) => {
  const form = page.getByTestId("task-form");
  await form.locator("#task-name").fill(name);
  await form.locator("#task-name").press("Enter");
  await page.getByTestId(`node-${name}`).waitFor();
  // the code editor replaces the textarea once its chunk has arrived (both are in the page for a moment)
  await form.locator('[data-testid="code-param-rawScript"][data-ready="true"]').waitFor();
  await form.getByLabel("rawScript").fill(script);
};

/** Press on ``from``, move in steps, release over ``to`` (offset by dx, dy): React Flow's drag and connect. */
const drag = async (from, to, { dx = 0, dy = 0 } = {}) => {
  const a = await from.boundingBox();
  const b = await to.boundingBox();
  if (!a || !b) throw new Error("drag: element not on screen");
  await page.mouse.move(a.x + a.width / 2, a.y + a.height / 2);
  await page.mouse.down();
  await page.mouse.move(b.x + b.width / 2 + dx, b.y + b.height / 2 + dy, { steps: 12 });
  await page.mouse.up();
};
const shot = async (name) => {
  if (shots) await page.screenshot({ path: join(shots, `${name}.png`) });
};

try {
  step = "a page needing sign-in sends to the sign-in page";
  await page.goto(`${url}/instances`);
  await page.waitForURL(/\/signin\?next=/);

  step = "a wrong password shows the server's message";
  await page.getByLabel("User").fill(user);
  await page.getByLabel("Password").fill("not-the-password");
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("alert").filter({ hasText: "wrong user name or password" }).waitFor();
  await audit("signin", "/signin");
  await shot("signin");

  step = "a wrong API token shows the server's message";
  await page.getByRole("button", { name: "API token" }).click();
  await page.getByLabel("API token").fill("not-a-token");
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("alert").filter({ hasText: "invalid or expired API token" }).waitFor();

  step = "sign in with user and password: an HttpOnly session cookie, writes need the CSRF token";
  await page.getByRole("button", { name: "User and password" }).click();
  await page.getByLabel("User").fill(user);
  await page.getByLabel("Password").fill(password);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.waitForURL(/\/instances$/);
  await page.getByTestId("instances").waitFor();
  const cookie = (await page.context().cookies()).find((c) => c.name === "porpoise_session");
  if (!cookie?.httpOnly || cookie.sameSite !== "Strict")
    throw new Error(`session cookie: ${JSON.stringify(cookie)}`);
  const forged = await page.evaluate(async () => {
    const r = await fetch("api/v1/projects", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ name: "csrf-probe" }),
    });
    return { status: r.status, body: await r.text() };
  });
  if (forged.status !== 403 || !forged.body.includes("X-CSRF-Token"))
    throw new Error(`no CSRF check: ${JSON.stringify(forged)}`);
  await audit("instances", "instances");

  step = "keyboard: the first Tab reaches the skip link, which moves focus to the page's main region";
  if ((await page.title()) !== "Workflow instances · Porpoise")
    throw new Error(`title: ${await page.title()}`);
  await page.locator("body").focus();
  await page.keyboard.press("Tab");
  if ((await page.evaluate(() => document.activeElement?.textContent)) !== "Skip to content")
    throw new Error("the first Tab does not reach the skip link");
  await page.keyboard.press("Enter");
  if ((await page.evaluate(() => document.activeElement?.tagName)) !== "MAIN")
    throw new Error("the skip link does not move focus to the main region");

  step = "keyboard: the navigation is reachable with Tab and followed with Enter";
  await page.reload(); // focus back at the page's start
  await page.getByTestId("instances").waitFor();
  await page.locator("body").focus();
  let reached = false;
  for (let i = 0; i < 15 && !reached; i += 1) {
    await page.keyboard.press("Tab");
    reached = await page.evaluate(() => document.activeElement?.textContent === "Workflows");
  }
  if (!reached) throw new Error("the Workflows link is not reachable with Tab");
  const outline = await page.evaluate(() => getComputedStyle(document.activeElement).outlineStyle);
  if (outline === "none") throw new Error("the focused link shows no focus outline");
  await page.keyboard.press("Enter");
  await page.waitForURL(/\/workflows$/);
  await page.getByTestId("workflows").waitFor();
  await audit("workflows", "workflows");

  step = "overview";
  await page.goto(`${url}/overview`);
  await page.getByTestId("recent-failures").waitFor();
  await audit("overview", "overview");
  await shot("overview");

  step = "create a 3-task workflow on the graph: rename, add, link by dragging, move, delete";
  await page.goto(`${url}/workflows/new`);
  await page.getByTestId("node-hello").waitFor();
  await page.locator("#wf-name").fill(`ui_${tag}`);
  await page.locator("#wf-project").fill("ui-e2e");
  await page.getByTestId("node-hello").click();
  await editTask("a", "echo start of a; sleep 3; echo done with a");
  await page.getByRole("button", { name: "Add task" }).click();
  await page.getByTestId("node-shell_1").waitFor();
  await editTask("b", "echo b");
  await page.getByLabel("Task type").selectOption("PYTHON");
  await page.getByRole("button", { name: "Add task" }).click();
  await page.getByTestId("node-python_1").waitFor();
  await editTask("c", ""); // left empty on purpose: the server refuses it at the field
  await drag(
    page.locator('[data-testid="node-a"] .react-flow__handle-right'),
    page.locator('[data-testid="node-b"] .react-flow__handle-left'),
  );
  await drag(
    page.locator('[data-testid="node-b"] .react-flow__handle-right'),
    page.locator('[data-testid="node-c"] .react-flow__handle-left'),
  );
  await page.getByTestId("rf__edge-a->b").waitFor({ state: "attached" });
  await page.getByTestId("rf__edge-b->c").waitFor({ state: "attached" });
  await page.getByTestId("task-form").getByLabel("Wait also for").fill("a"); // a link without dragging
  await page.getByTestId("task-form").getByRole("button", { name: "Link", exact: true }).click();
  await page.getByTestId("rf__edge-a->c").waitFor({ state: "attached" });
  const before = await page.getByTestId("node-c").boundingBox();
  await drag(page.getByTestId("node-c"), page.getByTestId("node-c"), { dx: 60, dy: 90 });
  const after = await page.getByTestId("node-c").boundingBox();
  if (!before || !after || Math.abs(after.y - before.y) < 30) throw new Error("node c did not move");
  await page.getByRole("button", { name: "Add task" }).click();
  await page.getByTestId("node-python_1").waitFor();
  await page.keyboard.press("Delete"); // the new task is selected
  await page.getByTestId("node-python_1").waitFor({ state: "detached" });

  step = "the text view shows the same document; back to the graph";
  await page.getByRole("button", { name: "YAML" }).click();
  const yaml = await page.getByTestId("editor-text").inputValue();
  if (!/upstream:\s*\n\s*- a/.test(yaml) || !/- b/.test(yaml)) throw new Error(`links missing:\n${yaml}`);
  await page.getByRole("button", { name: "Graph" }).click();
  await page.getByTestId("node-c").waitFor();
  const [bBox, cBox] = [
    await page.getByTestId("node-b").boundingBox(),
    await page.getByTestId("node-c").boundingBox(),
  ];
  if (!bBox || !cBox || cBox.y - bBox.y < 30) throw new Error("the moved node lost its place");

  step =
    "keyboard in the editor: a node named by its task, Tab to the next one (a focus ring), Enter opens its form";
  await page.getByRole("group", { name: /^a, SHELL/ }).focus();
  await page.keyboard.press("Tab");
  const focused = await page.evaluate(() => ({
    id: document.activeElement?.getAttribute("data-id"),
    label: document.activeElement?.getAttribute("aria-label"),
    ring: getComputedStyle(document.activeElement?.querySelector(".dag-node") ?? document.body).outlineStyle,
  }));
  if (!focused.id || !focused.label?.startsWith(`${focused.id}, `) || focused.ring === "none")
    throw new Error(`Tab from node a: ${JSON.stringify(focused)}`);
  await page.keyboard.press("Enter");
  if ((await page.getByTestId("task-form").locator("#task-name").inputValue()) !== focused.id)
    throw new Error(`Enter on node ${focused.id} did not open its form`);

  step = "save: the server's refusal is shown on the task and at its field, then fixed and saved";
  await page.getByRole("button", { name: "Save as new version" }).click();
  await page.getByTestId("node-c").getByTestId("node-error").waitFor();
  await page.getByTestId("field-rawScript").getByRole("alert").waitFor();
  // the refused save moved focus to the first invalid field
  await page.waitForFunction(() => document.activeElement?.closest('[data-testid="field-rawScript"]'), null, {
    timeout: 10_000,
  });
  await audit("editor", "workflows/new");
  await shot("editor");
  await page.getByLabel("rawScript").fill("print('c ran')");
  await page.getByRole("button", { name: "Save as new version" }).click();
  await page.waitForURL(/\/workflows\/\d+$/);
  await page.getByTestId("node-c").waitFor();

  step = "edit a schedule: next fire times as you type";
  await page.getByRole("button", { name: "New schedule" }).click();
  await page.getByLabel("Crontab").fill("30 4 * * *");
  await page
    .getByTestId("next-fires")
    .getByText(/04:30:00/)
    .first()
    .waitFor();
  await audit("schedule editor", "workflows/:code");
  await shot("schedule-editor");
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
  await audit("workflow", "workflows/:code");
  await shot("workflow");

  step = "the backfill dialog";
  await page.getByRole("button", { name: "Backfill…" }).click();
  await page.getByRole("form", { name: "Backfill" }).waitFor();
  await audit("backfill dialog", "workflows/:code");
  await shot("backfill-dialog");
  await page.getByRole("form", { name: "Backfill" }).getByRole("button", { name: "Close" }).click();

  step = "start it from the page: it opens the new instance";
  await page.getByRole("button", { name: "Start…" }).click();
  await page.getByRole("button", { name: "Start now" }).click();
  await page.waitForURL(/\/instances\/\d+$/);

  step = "watch task a run, then the graph turn green (live, no reload)";
  await page.locator('[data-testid="node-a"][data-state="RUNNING_EXECUTION"]').waitFor();
  await page.locator('[data-testid="node-c"][data-state="SUCCESS"]').waitFor();
  await page.locator('[data-testid="node-b"][data-state="SUCCESS"]').waitFor();
  await page.locator('[data-testid="node-a"][data-state="SUCCESS"]').waitFor();
  await page.locator('.pagehead [data-state="SUCCESS"]').waitFor();
  // times come with the refetch that follows a state change
  await page.getByTestId("task-b").filter({ hasNotText: "—" }).waitFor();
  await audit("instance", "instances/:id");
  await shot("instance");
  if (!/^Instance \d+ · ui_.+ · Porpoise$/.test(await page.title()))
    throw new Error(`the instance page's title: ${await page.title()}`);

  step = "keyboard on the instance page: a node named by its task and state, Enter shows its task";
  await page.getByRole("group", { name: /^b, \w+, success$/ }).focus();
  await page.keyboard.press("Enter");
  await page.getByTestId("selected-task").locator("strong", { hasText: /^b$/ }).waitFor();

  step = "open task a's log from the graph";
  await page.getByTestId("node-a").click();
  await page.getByTestId("selected-task").getByRole("link", { name: "open log" }).click();
  await page.waitForURL(/\/tasks\/\d+\/log$/);
  // exact: the log begins with the rendered script, which holds the same words
  await page.getByTestId("log").getByText("done with a", { exact: true }).waitFor();
  await page.getByTestId("log-status").filter({ hasText: "(complete)" }).waitFor();
  await page.getByLabel("Search the log").fill("DONE WITH");
  await page.getByLabel("Search the log").press("Enter");
  await page.getByTestId("search-hits").getByText("done with a", { exact: true }).waitFor();
  // the rendered script's line and the output's
  await page.getByTestId("search-status").filter({ hasText: "2 matches" }).waitFor();
  await audit("log", "tasks/:id/log");
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
  await page.getByTestId("log").getByText("failing on purpose", { exact: true }).waitFor();
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
  await audit("cluster", "cluster");
  await shot("cluster");

  step =
    "admin: create a user, disable it, reset its password; grant it a project; a data source shows no password";
  await page.goto(`${url}/admin?tab=users`);
  const other = `ui_other_${tag}`;
  await page.getByLabel("New user name").fill(other);
  await page.getByLabel("New user password").fill("first-password");
  await page.getByRole("button", { name: "Create user" }).click();
  await page.getByTestId(`user-${other}`).getByText("enabled").waitFor();
  await page.getByTestId(`user-${other}`).getByRole("button", { name: "Disable" }).click();
  await page.getByTestId(`user-${other}`).getByText("disabled").waitFor();
  await page.getByTestId(`user-${other}`).getByRole("button", { name: "Reset password…" }).click();
  await page.getByLabel(`New password for ${other}`).fill("second-password");
  await audit("admin reset password", "admin");
  await page.getByRole("button", { name: "Set password", exact: true }).click();
  await page.getByLabel(`New password for ${other}`).waitFor({ state: "detached" });
  await audit("admin-users", "admin");
  await page.getByRole("button", { name: "Project grants" }).click();
  await page.getByLabel("Project").selectOption("ui-e2e");
  await page.getByLabel("User to grant").fill(other);
  await page.getByRole("button", { name: "Grant", exact: true }).click();
  await page.getByTestId("admin-grants").getByRole("cell", { name: other }).waitFor();

  step = "admin: create a tenant, grant it to a project; a second one of the name shows the API's refusal";
  await page.getByRole("button", { name: "Tenants", exact: true }).click();
  const tenant = `tn_${tag}`;
  await page.getByLabel("Tenant name").fill(tenant);
  await page.getByRole("button", { name: "Create tenant" }).click();
  const tenantRow = page.getByTestId(`tenant-${tenant}`);
  await tenantRow.getByLabel(`Project to grant ${tenant} to`).selectOption("ui-e2e");
  await tenantRow.getByRole("button", { name: "Grant", exact: true }).click();
  await tenantRow.getByRole("button", { name: `Revoke ${tenant} from ui-e2e` }).waitFor();
  await page.getByLabel("Tenant name").fill(tenant);
  await page.getByRole("button", { name: "Create tenant" }).click();
  await page.getByTestId("admin-tenants").getByRole("alert").filter({ hasText: "exists already" }).waitFor();
  await audit("admin-tenants", "admin");
  await page.getByRole("button", { name: "Data sources" }).click();
  await page.getByRole("button", { name: "New data source" }).click();
  let form = page.getByRole("form", { name: "New data source" });
  await form.getByLabel("Data source name").fill(`ds_${tag}`);
  await form.getByLabel("Database", { exact: true }).fill("warehouse");
  await form.getByLabel("Password", { exact: true }).fill("very-secret-pw");
  await form.getByRole("button", { name: "Save" }).click();
  await page.getByTestId(`datasource-ds_${tag}`).getByText('"password":"***"').waitFor();
  if ((await page.locator("body").innerText()).includes("very-secret-pw"))
    throw new Error("a password is shown");
  await page.getByTestId(`datasource-ds_${tag}`).getByRole("button", { name: "Edit" }).click();
  form = page.getByRole("form", { name: `Edit data source ds_${tag}` });
  await form.getByLabel("Host", { exact: true }).fill("db.example");
  await form.getByRole("button", { name: "Save" }).click();
  // the stored password goes only where it went: a new host needs it again, said at the field
  await form.getByRole("alert").filter({ hasText: "give the password again" }).waitFor();
  await form.getByLabel("Password", { exact: true }).fill("very-secret-pw");
  await form.getByRole("button", { name: "Save" }).click();
  await page.getByTestId(`datasource-ds_${tag}`).getByText("db.example").waitFor();
  await audit("admin-datasources", "admin");

  step = "admin: a task group, resized live, its queue";
  await page.getByRole("button", { name: "Task groups" }).click();
  await page.getByLabel("Task group name").fill(`tg_${tag}`);
  await page.getByRole("button", { name: "Create task group" }).click();
  const group = page.getByTestId(`task-group-tg_${tag}`);
  await group.getByText("0 / 1").waitFor();
  await group.getByRole("spinbutton").fill("3");
  await group.getByRole("button", { name: "Resize" }).click();
  await group.getByText("0 / 3").waitFor();
  await group.getByRole("button", { name: "Queue" }).click();
  await page.locator('[data-testid^="queue-"]').getByText("empty").waitFor();
  await audit("admin-task-groups", "admin");
  await shot("admin");

  step = "the API server goes away: a banner says so; it comes back: the banner goes, the page is live again";
  await page.goto(`${url}/instances`);
  await page.getByTestId("instances").waitFor();
  await ask("STOP_API");
  await page.getByTestId("connection-lost").waitFor();
  await shot("connection-lost");
  await ask("START_API");
  await page.getByTestId("connection-lost").waitFor({ state: "detached" });
  await page.getByTestId(`instance-${longInstance}`).waitFor();

  step = "unknown page: a message, not a blank page";
  await page.goto(`${url}/no/such/page`);
  await page.getByRole("heading", { name: "Nothing here" }).waitFor();
  await audit("not found", "*");
  await shot("not-found");

  if (consoleErrors.length) throw new Error(`uncaught page errors: ${consoleErrors.join("; ")}`);
  step = "accessibility (axe-core, WCAG 2 A/AA): no serious or critical violation on any page";
  if (a11y.length) throw new Error(a11y.join("\n"));
  console.log("e2e: all steps passed");
} catch (err) {
  await reportFailure("e2e", page, step, err, consoleErrors);
} finally {
  input.close(); // an open stdin would keep node running
  await close();
}
