// The graph editor's collapse in real headless Chromium, on a generated DAG (tests/test_ui_e2e.py saves it):
//   start -> b<i>_0 -> b<i>_1 -> ... -> b<i>_7 -> join   for i in 0..9, and b2_0 -> b3_4, b3_2 -> b3_4 besides
// so the branch of b3_0 (it and what runs only after it) is b3_0..b3_3: b3_4 also waits for b2_0; and two
// links go from that branch to b3_4.
// Environment: PORPOISE_URL, PORPOISE_TOKEN, E2E_WORKFLOW (the DAG's code), CHROMIUM.
// Exit 0 when every step passed; otherwise the failing step and the page's text are printed.
import { launch, reportFailure } from "./browser.mjs";

const url = process.env.PORPOISE_URL;
const code = process.env.E2E_WORKFLOW;
const { page, close } = await launch();
page.setDefaultTimeout(60_000);
const pageErrors = [];
page.on("pageerror", (err) => pageErrors.push(String(err)));
let step = "start";

const graph = page.getByTestId("edit-graph");
const layouts = async () => Number(await graph.getAttribute("data-layouts"));
/** Wait until the layout count passes ``n`` (a collapse or an expand lays the graph out again). */
const laidOutAfter = (n) =>
  page.waitForFunction(
    (min) => Number(document.querySelector('[data-testid="edit-graph"]')?.dataset.layouts) > min,
    n,
  );
const edgeCount = () => page.locator(".react-flow__edge").count();
const attached = (testId) => page.getByTestId(testId).waitFor({ state: "attached" });
const detached = (testId) => page.getByTestId(testId).waitFor({ state: "detached" });

try {
  step = "sign in with the API token and open the editor on the generated DAG";
  await page.goto(`${url}/signin`);
  await page.getByRole("button", { name: "API token" }).click();
  await page.getByLabel("API token").fill(process.env.PORPOISE_TOKEN);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.waitForURL(/\/instances$/);
  await page.goto(`${url}/workflows/${code}/edit`);
  await page.waitForFunction(
    () => Number(document.querySelector('[data-testid="edit-graph"]')?.dataset.layouts) > 0,
  );
  await attached("node-b3_3");
  const allEdges = await edgeCount();
  if (allEdges !== 10 * 9 + 2) throw new Error(`expected 92 edges, saw ${allEdges}`);

  step = "collapse b3_0's branch: one node with its count, edges to it drawn once, laid out again";
  await page.getByTestId("node-b3_0").click();
  let before = await layouts();
  await page.getByRole("button", { name: "Collapse branch" }).click();
  const group = page.getByTestId("group-b3_0");
  await group.waitFor();
  if ((await group.getAttribute("data-count")) !== "4") throw new Error("the group should hold b3_0..b3_3");
  await group.getByText("SHELL 4").waitFor();
  for (const hidden of ["node-b3_0", "node-b3_1", "node-b3_2", "node-b3_3"]) await detached(hidden);
  await attached("node-b3_4"); // also waits for b2_0: not in the branch
  await attached("rf__edge-start->group:1");
  await attached("rf__edge-group:1->b3_4");
  await attached("rf__edge-b2_0->b3_4");
  await laidOutAfter(before);
  // 6 links (start -> b3_0, three inside, b3_2 -> b3_4 and b3_3 -> b3_4) are drawn as 2 edges
  if ((await edgeCount()) !== allEdges - 4) throw new Error(`edges after collapse: ${await edgeCount()}`);

  step = "expand it again: the tasks and their links come back, laid out again";
  before = await layouts();
  await page.getByRole("button", { name: "Expand b3_0 (4 tasks)" }).click();
  await detached("group-b3_0");
  for (const back of ["node-b3_0", "node-b3_1", "node-b3_2", "node-b3_3"]) await attached(back);
  await attached("rf__edge-b3_2->b3_3");
  await laidOutAfter(before);
  if ((await edgeCount()) !== allEdges) throw new Error(`edges after expand: ${await edgeCount()}`);

  step = "collapse a selection (Ctrl + click); a set that a path leaves and re-enters is refused";
  await page.getByTestId("node-b1_0").click();
  await page.getByTestId("node-b1_2").click({ modifiers: ["Control"] });
  await page.getByRole("button", { name: "Collapse selection" }).click();
  await page.getByRole("status").filter({ hasText: "cycle" }).waitFor();
  await page.getByTestId("node-b1_1").click({ modifiers: ["Control"] });
  await page.getByRole("button", { name: "Collapse selection" }).click();
  await page.getByTestId("group-b1_0").waitFor();
  if ((await page.getByTestId("group-b1_0").getAttribute("data-count")) !== "3")
    throw new Error("the selection group should hold b1_0..b1_2");

  step = "finding a task hidden in a group expands the group and selects the task";
  await page.getByLabel("Find a task").fill("b1_1");
  await page.getByLabel("Find a task").press("Enter");
  await detached("group-b1_0");
  await page.locator('[data-testid="node-b1_1"].selected').waitFor();
  await page.getByTestId("task-form").locator("#task-name").waitFor();

  if (pageErrors.length) throw new Error(`uncaught page errors: ${pageErrors.join("; ")}`);
  console.log("collapse: all steps passed");
} catch (err) {
  await reportFailure("collapse", page, step, err, pageErrors);
} finally {
  await close();
}
