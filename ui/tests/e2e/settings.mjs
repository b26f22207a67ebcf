// The admin settings screens in real headless Chromium against a live API server (tests/test_ui_e2e.py):
// - data sources: the type select sets the default port; a refused host shown at the field; a PostgreSQL source
//   by DSN created, tested ("connected"), edited (the stored DSN kept: tested again), granted to a project;
// - environments: a refused name at the field, created for a worker group, edited, granted;
// - project parameters: a built-in name refused at the field, a secret one created (masked), edited (kept);
// - worker groups: "default" refused at the field, a group of the live worker created (shown live), edited,
//   deleted;
// - the editor: a SQL task's data source is a dropdown; a saved source that no longer exists refused by the
//   server at the field, another picked from the dropdown and saved.
// axe-core on every screen. Environment: PORPOISE_URL, E2E_USER / E2E_PASSWORD (an admin), E2E_TAG, E2E_DSN (a
// PostgreSQL URL the API host reaches), E2E_WORKER (the live worker's address), E2E_WORKFLOW (a workflow whose SQL
// task names E2E_GONE, a deleted source), E2E_SOURCE (an existing source), E2E_SCREENSHOTS (optional), CHROMIUM.
import { join } from "node:path";
import { violations } from "./a11y.mjs";
import { launch, reportFailure } from "./browser.mjs";

const url = process.env.PORPOISE_URL;
const tag = process.env.E2E_TAG;
const shots = process.env.E2E_SCREENSHOTS;
const { page, close } = await launch();
page.setDefaultTimeout(60_000);
const pageErrors = [];
page.on("pageerror", (err) => pageErrors.push(String(err)));
const a11y = [];
const audit = async (name, route) => a11y.push(...(await violations(page, name, route)));
const shot = async (name) => {
  if (shots) await page.screenshot({ path: join(shots, `${name}.png`), fullPage: true });
};
/** ``input`` is marked invalid and its field shows ``text`` (the server's refusal at the field). */
const refusedAt = async (input, text) => {
  await input.locator("xpath=..").getByRole("alert").filter({ hasText: text }).waitFor();
  if ((await input.getAttribute("aria-invalid")) !== "true")
    throw new Error("the refused field is not marked");
};
const tab = async (name, testId) => {
  await page.getByRole("navigation", { name: "Admin sections" }).getByRole("button", { name }).click();
  await page.getByTestId(testId).waitFor();
};
let step = "start";

try {
  step = "sign in and open the data sources";
  await page.goto(`${url}/signin?next=${encodeURIComponent("/admin?tab=datasources")}`);
  await page.getByLabel("User").fill(process.env.E2E_USER);
  await page.getByLabel("Password").fill(process.env.E2E_PASSWORD);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByTestId("admin-datasources").waitFor();

  step = "data source: the type sets the port; a bad host refused at the field";
  const source = `e2e_pg_${tag}`;
  await page.getByRole("button", { name: "New data source" }).click();
  let form = page.getByRole("form", { name: "New data source" });
  await form.getByLabel("Data source name").fill(source);
  await form.getByLabel("Type", { exact: true }).selectOption("CLICKHOUSE");
  if ((await form.getByLabel("Port", { exact: true }).inputValue()) !== "9000")
    throw new Error("CLICKHOUSE did not set port 9000");
  await form.getByLabel("Type", { exact: true }).selectOption("POSTGRESQL");
  if ((await form.getByLabel("Port", { exact: true }).inputValue()) !== "5432")
    throw new Error("POSTGRESQL did not set port 5432");
  const host = form.getByLabel("Host", { exact: true });
  await host.fill("bad host!");
  await form.getByRole("button", { name: "Save" }).click();
  await refusedAt(host, "does not match");

  step = "data source: by DSN, saved, tested";
  await host.fill("127.0.0.1");
  await form.getByLabel(/^DSN/).fill(process.env.E2E_DSN);
  await form.getByRole("button", { name: "Save" }).click();
  await form.waitFor({ state: "detached" });
  const row = page.getByTestId(`datasource-${source}`);
  await row.getByRole("button", { name: "Test connection" }).click();
  await row
    .getByTestId(`test-result-${source}`)
    .filter({ hasText: /^connected: / })
    .waitFor();

  step = "data source: edited keeping the stored DSN, tested again, granted to a project";
  await row.getByRole("button", { name: "Edit" }).click();
  form = page.getByRole("form", { name: `Edit data source ${source}` });
  if ((await form.getByLabel(/^DSN/).inputValue()) !== "") throw new Error("the stored DSN is shown");
  await form.getByText("stored: leave empty to keep it").first().waitFor();
  await form.getByLabel("Note", { exact: true }).fill("the test cluster's database");
  await audit("data sources", "admin");
  await shot("datasources");
  await form.getByRole("button", { name: "Save" }).click();
  await form.waitFor({ state: "detached" });
  await row.getByRole("button", { name: "Test connection" }).click();
  await row
    .getByTestId(`test-result-${source}`)
    .filter({ hasText: "testing…" })
    .waitFor({ state: "detached" });
  await row
    .getByTestId(`test-result-${source}`)
    .filter({ hasText: /^connected: / })
    .waitFor();
  await row.getByLabel(`Project to grant ${source} to`).selectOption("ui-e2e");
  await row.getByRole("button", { name: "Grant" }).click();
  await row.getByRole("button", { name: `Revoke ${source} from project ui-e2e` }).waitFor();

  step = "environment: a bad name refused at the field, created for a worker group, edited, granted";
  await tab("Environments", "admin-environments");
  const env = `e2e_env_${tag}`;
  await page.getByRole("button", { name: "New environment" }).click();
  form = page.getByRole("form", { name: "New environment" });
  const envName = form.getByLabel("Environment name");
  await envName.fill("bad name");
  await form.getByLabel("Shell lines").fill("export E2E_HOME=/opt/e2e");
  await form.getByRole("checkbox", { name: "default" }).check();
  await form.getByRole("button", { name: "Save" }).click();
  await refusedAt(envName, "does not match");
  await envName.fill(env);
  await form.getByRole("button", { name: "Save" }).click();
  await form.waitFor({ state: "detached" });
  const envRow = page.getByTestId(`environment-${env}`);
  await envRow.getByText("export E2E_HOME=/opt/e2e").waitFor();
  await envRow.getByRole("button", { name: "Edit" }).click();
  form = page.getByRole("form", { name: `Edit environment ${env}` });
  await form.getByLabel("Description", { exact: true }).fill("e2e tools");
  await form.getByRole("button", { name: "Save" }).click();
  await envRow.getByText("e2e tools").waitFor();
  await envRow.getByLabel(`Project to grant ${env} to`).selectOption("ui-e2e");
  await envRow.getByRole("button", { name: "Grant" }).click();
  await envRow.getByRole("button", { name: `Revoke ${env} from project ui-e2e` }).waitFor();
  await audit("environments", "admin");
  await shot("environments");

  step = "project parameters: a built-in name refused at the field, a secret one created masked and edited";
  await tab("Project parameters", "admin-project-params");
  await page.getByLabel("Project", { exact: true }).selectOption("ui-e2e");
  await page.getByRole("button", { name: "New parameter" }).click();
  form = page.getByRole("form", { name: "New project parameter" });
  const paramName = form.getByLabel("Parameter name");
  await paramName.fill("system.datetime");
  await form.getByLabel("Secret (sealed at rest, shown as ***)").check();
  await form.getByLabel("Value", { exact: true }).fill(`s3cret-${tag}`);
  await form.getByRole("button", { name: "Save" }).click();
  await refusedAt(paramName, "built-in");
  const param = `e2e_secret_${tag}`;
  await paramName.fill(param);
  await form.getByRole("button", { name: "Save" }).click();
  await form.waitFor({ state: "detached" });
  const paramRow = page.getByTestId(`param-${param}`);
  await paramRow.getByText("***").waitFor();
  if ((await page.locator("body").innerText()).includes(`s3cret-${tag}`))
    throw new Error("the secret is shown");
  await paramRow.getByRole("button", { name: "Edit" }).click();
  form = page.getByRole("form", { name: `Edit parameter ${param}` });
  await form.getByText("stored secret: leave empty to keep it").waitFor();
  await audit("project parameters", "admin");
  await shot("project-parameters");
  await form.getByRole("button", { name: "Save" }).click();
  await form.waitFor({ state: "detached" });

  step = "worker groups: 'default' refused at the field, a group of the live worker created, edited, deleted";
  await tab("Worker groups", "admin-worker-groups");
  const group = `e2e_wg_${tag}`;
  const worker = process.env.E2E_WORKER;
  await page.getByRole("button", { name: "New worker group" }).click();
  form = page.getByRole("form", { name: "New worker group" });
  const groupName = form.getByLabel("Worker group name");
  await groupName.fill("default");
  await form.getByRole("checkbox", { name: `Assign ${worker}` }).check();
  await form.getByRole("button", { name: "Save" }).click();
  await refusedAt(groupName, "cannot be created");
  await groupName.fill(group);
  await form.getByRole("button", { name: "Save" }).click();
  await form.waitFor({ state: "detached" });
  const groupRow = page.getByTestId(`worker-group-${group}`);
  await groupRow.getByText(worker).first().waitFor();
  await groupRow.getByText("live", { exact: true }).waitFor();
  await groupRow.getByRole("button", { name: "Edit" }).click();
  form = page.getByRole("form", { name: `Edit worker group ${group}` });
  await form.getByLabel("Description", { exact: true }).fill("e2e workers");
  await audit("worker groups", "admin");
  await shot("worker-groups");
  await form.getByRole("button", { name: "Save" }).click();
  await groupRow.getByText("e2e workers").waitFor();
  await groupRow.getByRole("button", { name: "Delete" }).click();
  await groupRow.waitFor({ state: "detached" });

  step = "editor: the SQL task's data source is a dropdown; a deleted one refused at the field on save";
  await page.goto(`${url}/workflows/${process.env.E2E_WORKFLOW}/edit`);
  await page.getByTestId("node-q").click();
  const choice = page.getByTestId("task-form").getByLabel("datasource");
  // the form shows the field before the project's data sources arrive: then it becomes a dropdown
  await choice
    .and(page.locator("select"))
    .waitFor({ timeout: 10_000 })
    .catch(() => undefined);
  if ((await choice.evaluate((e) => e.tagName)) !== "SELECT")
    throw new Error("the data source is not a dropdown");
  if ((await choice.inputValue()) !== process.env.E2E_GONE)
    throw new Error("the task's data source is not shown");
  const offered = await choice.locator("option").allTextContents();
  for (const name of [process.env.E2E_SOURCE, source])
    if (!offered.includes(name)) throw new Error(`${name} is not offered: ${offered.join(", ")}`);
  await page.getByRole("button", { name: "Save as new version" }).click();
  await page
    .getByTestId("field-datasource")
    .getByRole("alert")
    .filter({ hasText: "does not exist" })
    .waitFor();
  await audit("editor (SQL task)", "workflows/:code/edit");
  await shot("editor-sql-datasource");
  await choice.selectOption(process.env.E2E_SOURCE);
  await page.getByRole("button", { name: "Save as new version" }).click();
  await page.waitForURL(/\/workflows\/\d+$/);

  if (a11y.length) throw new Error(`accessibility violations:\n${a11y.join("\n")}`);
  if (pageErrors.length) throw new Error(`uncaught page errors: ${pageErrors.join("; ")}`);
  console.log("settings: all steps passed");
} catch (err) {
  await reportFailure("settings", page, step, err, pageErrors);
} finally {
  await close();
}
