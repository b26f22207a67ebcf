// "Why isn't it running?" in real headless Chromium (tests/test_ui_e2e_waiting.py): on the instance page a task
// of a worker group without a worker says "no live worker in group …" in its table row and in its DAG node's
// tooltip, and the second task of a task group of size 1 gives its place in the group's queue; the selected
// task's detail says it too. axe-core on the page.
// Environment: PORPOISE_URL, E2E_USER / E2E_PASSWORD (an admin), E2E_INSTANCE (an instance with tasks "nowhere"
// in worker group E2E_GROUP, "holder" and "queued" in task group E2E_TASK_GROUP of size 1), E2E_SCREENSHOTS
// (optional), CHROMIUM.
import { join } from "node:path";
import { violations } from "./a11y.mjs";
import { launch, reportFailure } from "./browser.mjs";

const env = process.env;
const { page, close } = await launch();
page.setDefaultTimeout(60_000);
const pageErrors = [];
page.on("pageerror", (err) => pageErrors.push(String(err)));
let step = "start";

try {
  step = "sign in and open the instance";
  await page.goto(`${env.PORPOISE_URL}/signin?next=${encodeURIComponent(`/instances/${env.E2E_INSTANCE}`)}`);
  await page.getByLabel("User").fill(env.E2E_USER);
  await page.getByLabel("Password").fill(env.E2E_PASSWORD);
  await page.getByRole("button", { name: "Sign in" }).click();

  step = "the task of a group without a worker says so in its row";
  const noWorker = `no live worker in group ${env.E2E_GROUP}`;
  await page.getByTestId("task-nowhere").getByTestId("why-nowhere").filter({ hasText: noWorker }).waitFor();

  step = "and in its DAG node's tooltip";
  const node = page.getByTestId("node-nowhere");
  await node.getByTestId("node-waiting").waitFor();
  if ((await node.getAttribute("title")) !== noWorker)
    throw new Error(`node tooltip: ${await node.getAttribute("title")}`);

  step = "the second task of the task group gives its place in the queue";
  const place = `task group ${env.E2E_TASK_GROUP}: position 1 of 1 in its queue, 1 of 1 slots used`;
  await page.getByTestId("task-queued").getByTestId("why-queued").filter({ hasText: place }).waitFor();
  if ((await page.getByTestId("node-queued").getAttribute("title")) !== place)
    throw new Error("the queued task's node has no reason");

  step = "the selected task's detail gives the reason";
  await page.getByTestId("task-queued").click();
  await page.getByTestId("selected-why").filter({ hasText: place }).waitFor();

  step = "accessibility";
  const found = await violations(page, "instance (waiting)", "instances/:id");
  if (found.length) throw new Error(`accessibility violations:\n${found.join("\n")}`);
  if (env.E2E_SCREENSHOTS)
    await page.screenshot({ path: join(env.E2E_SCREENSHOTS, "waiting-reason.png"), fullPage: true });
  if (pageErrors.length) throw new Error(`uncaught page errors: ${pageErrors.join("; ")}`);
  console.log("waiting: all steps passed");
} catch (err) {
  await reportFailure("waiting", page, step, err, pageErrors);
} finally {
  await close();
}
