// Task forms in real headless Chromium (tests/test_ui_e2e_forms.py, issue 28 item 9): a SWITCH built as a
// branch editor (two conditions picking tasks from the workflow, and the default), local parameters as rows
// (a bad value refused at its row before the save), scripts in the highlighting code editor (Escape then Tab
// leaves it); saved, put online and run: the branch labels on the instance's DAG edges, the branches not taken
// SKIPPED, and the rendered script (placeholders resolved) in the task's detail and at the head of its log.
// Environment: PORPOISE_URL, E2E_USER / E2E_PASSWORD (an admin), E2E_TAG, E2E_PROJECT (an existing project),
// E2E_SCREENSHOTS (optional), CHROMIUM.
import { join } from "node:path";
import { violations } from "./a11y.mjs";
import { launch, reportFailure } from "./browser.mjs";

const url = process.env.PORPOISE_URL;
const shots = process.env.E2E_SCREENSHOTS;
const { page, close } = await launch();
page.setDefaultTimeout(60_000);
const pageErrors = [];
page.on("pageerror", (err) => pageErrors.push(String(err)));
const a11y = [];
const audit = async (name, route) => a11y.push(...(await violations(page, name, route)));
const shot = async (name) => {
  if (shots) await page.screenshot({ path: join(shots, `${name}.png`) });
};
const form = () => page.getByTestId("task-form");
/** Add a task of ``type`` from the toolbar and rename it. */
const addTask = async (type, name) => {
  await page.getByLabel("Task type").selectOption(type);
  await page.getByRole("button", { name: "Add task" }).click();
  const fresh = `${type.toLowerCase()}_1`;
  await page.getByTestId(`node-${fresh}`).waitFor();
  await form().locator("#task-name").fill(name);
  await form().locator("#task-name").press("Enter");
  await page.getByTestId(`node-${name}`).waitFor();
};
/** Type ``text`` into the selected task's script once the code editor has replaced the textarea. */
const setScript = async (text) => {
  await form().locator('[data-testid="code-param-rawScript"][data-ready="true"]').waitFor();
  await form().getByLabel("rawScript").fill(text);
};
const edgeLabel = (text) => page.locator(".react-flow__edge-text", { hasText: text });
let step = "start";

try {
  step = "sign in and open a new workflow";
  await page.goto(`${url}/signin?next=${encodeURIComponent("/workflows/new")}`);
  await page.getByLabel("User").fill(process.env.E2E_USER);
  await page.getByLabel("Password").fill(process.env.E2E_PASSWORD);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByTestId("node-hello").waitFor();
  await page.locator("#wf-name").fill(`ui_forms_${process.env.E2E_TAG}`);
  await page.locator("#wf-project").fill(process.env.E2E_PROJECT);

  step = "task pick: a script in the code editor, highlighted; Escape then Tab leaves it";
  await page.getByTestId("node-hello").click();
  await form().locator("#task-name").fill("pick");
  await form().locator("#task-name").press("Enter");
  await page.getByTestId("node-pick").waitFor();
  await setScript("echo \"day ${day} for ${system.task.definition.name}\"\necho '${setValue(n=5)}'");
  await form().locator(".cm-content .tok-string, .cm-content span[class]").first().waitFor();
  await form().getByText("Esc then Tab leaves the editor").waitFor();
  await form().getByLabel("rawScript").focus();
  await page.keyboard.press("Escape");
  await page.keyboard.press("Tab");
  if (await page.evaluate(() => document.activeElement?.classList.contains("cm-content")))
    throw new Error("Escape then Tab did not leave the code editor");

  step = "local parameters as rows: a bad DATE refused at its row before the save";
  const params = form().getByTestId("local-params");
  await params.getByRole("button", { name: "Add parameter" }).click();
  await params.getByLabel("prop 1").fill("n");
  await params.getByLabel("direction 1").selectOption("OUT");
  await params.getByLabel("type 1").selectOption("INTEGER");
  await params.getByRole("button", { name: "Add parameter" }).click();
  await params.getByLabel("prop 2").fill("day");
  await params.getByLabel("type 2").selectOption("DATE");
  await params.getByLabel("value 2").fill("tomorrow");
  await params.getByTestId("param-row-1").getByRole("alert").filter({ hasText: "not a DATE" }).waitFor();
  await page.getByRole("button", { name: "Save as new version" }).click();
  await page.getByRole("status").filter({ hasText: "1 local parameter(s) to fix before saving" }).waitFor();
  await params.getByLabel("value 2").fill("$[yyyy-MM-dd]");
  await params.getByTestId("param-row-1").getByRole("alert").waitFor({ state: "detached" });
  await audit("editor (code, local parameters)", "workflows/new");
  await shot("editor-code");

  step = "three tasks the branches run";
  for (const name of ["big", "small", "rest"]) {
    await addTask("SHELL", name);
    await setScript(`echo ${name} ran`);
  }

  step = "a SWITCH below pick with two branches and the default, picked from the workflow's tasks";
  await addTask("SWITCH", "route");
  await form().getByLabel("Wait also for").fill("pick");
  await form().getByRole("button", { name: "Link" }).click();
  const branches = form().getByTestId("switch-branches");
  await branches.getByLabel("condition 1").fill("${n} > 3");
  await branches.getByLabel("then run 1").selectOption("big");
  await branches.getByRole("button", { name: "Add branch" }).click();
  await branches.getByLabel("condition 2").fill("${n} < 0");
  await branches.getByLabel("then run 2").selectOption("small");
  await branches.getByLabel("default").selectOption("rest");
  await edgeLabel("${n} > 3").waitFor();
  await edgeLabel("${n} < 0").waitFor();
  await edgeLabel("default").waitFor();
  await page.getByRole("button", { name: "Auto layout" }).click();
  await page.getByTestId("node-route").click();
  await edgeLabel("default").waitFor();
  await audit("editor (switch)", "workflows/new");
  await shot("editor-switch");

  step = "save, put online, start";
  await page.getByRole("button", { name: "Save as new version" }).click();
  await page.waitForURL(/\/workflows\/\d+$/);
  await page.getByRole("button", { name: "Put online" }).click();
  await page.getByRole("button", { name: "Take offline" }).waitFor();
  await page.getByRole("button", { name: "Start…" }).click();
  await page.getByRole("button", { name: "Start now" }).click();
  await page.waitForURL(/\/instances\/\d+$/);

  step = "the instance finishes (read from the API: the live updates are tested elsewhere)";
  const instance = page.url().split("/").pop();
  let state = "";
  for (let i = 0; i < 120 && !["SUCCESS", "FAILURE", "STOP"].includes(state); i += 1) {
    if (i) await page.waitForTimeout(1000);
    state = await page.evaluate(async (id) => {
      const r = await fetch(`api/v1/instances/${id}`);
      const body = await r.json();
      return `${body.state}`;
    }, instance);
  }
  if (state !== "SUCCESS") throw new Error(`instance ${instance} ended ${state}`);
  await page.reload();

  step = "the instance: branch labels on its edges, big ran, small and rest SKIPPED";
  await page.locator('.pagehead [data-state="SUCCESS"]').waitFor();
  await page.locator('[data-testid="node-big"][data-state="SUCCESS"]').waitFor();
  await page.locator('[data-testid="node-small"][data-state="SKIPPED"]').waitFor();
  await page.locator('[data-testid="node-rest"][data-state="SKIPPED"]').waitFor();
  await edgeLabel("${n} > 3").waitFor();
  await edgeLabel("default").waitFor();

  step = "the rendered script in pick's detail: its placeholders resolved";
  await page.getByTestId("node-pick").click();
  const rendered = page.getByTestId("selected-task").getByTestId("rendered-script");
  await rendered.filter({ hasText: /echo "day \d{4}-\d{2}-\d{2} for pick"/ }).waitFor();
  await rendered.filter({ hasText: "echo '${setValue(n=5)}'" }).waitFor();
  await audit("instance (rendered script)", "instances/:id");
  await shot("task-rendered-script");

  step = "the log begins with the rendered script";
  await page.getByTestId("selected-task").getByRole("link", { name: "open log" }).click();
  await page.waitForURL(/\/tasks\/\d+\/log$/);
  await page.getByTestId("log").getByText("[porpoise] rendered rawScript (2 lines):").waitFor();
  await page
    .getByTestId("log")
    .getByText(/echo "day \d{4}-\d{2}-\d{2} for pick"/)
    .waitFor();

  if (a11y.length) throw new Error(`axe-core violations:\n${a11y.join("\n")}`);
  if (pageErrors.length) throw new Error(`page errors: ${pageErrors.join("; ")}`);
  console.log("forms: all steps passed");
} catch (err) {
  await reportFailure("forms", page, step, err, pageErrors);
} finally {
  await close();
}
