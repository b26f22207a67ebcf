// UI timings in real headless Chromium, driven by bench/ui.py (which starts the cluster and the data):
//   PORPOISE_URL, PORPOISE_TOKEN, BIG_INSTANCE (an instance of a 1,000-task workflow), BIG_WORKFLOW (that
//   workflow's code, opened in the editor), FLIP_INSTANCE (a
//   finished instance whose state bench/ui.py changes in the database when this script prints READY and
//   then writes "GO <epoch ms of the commit>" on stdin), WATERFALL (set: also the cold instance page's
//   and the editor's requests). Prints one JSON object of milliseconds.
import { createInterface } from "node:readline";
import { launch } from "./browser.mjs";

const url = process.env.PORPOISE_URL;
const { page, close } = await launch();

page.setDefaultTimeout(120_000);
await page.addInitScript((token) => {
  sessionStorage.setItem("porpoise.token", token);
  window.__longTasks = [];
  // when the page first showed a task-table row and a graph node (a node is drawn once it is visible: React
  // Flow hides a node until it has its size): recorded in the page, not when Playwright's polling notices
  window.__seen = {};
  const watched = {
    table: '[data-testid="task-table"] [role="row"]',
    graph: '.react-flow__node[style*="visibility: visible"]',
  };
  new MutationObserver(() => {
    for (const [key, selector] of Object.entries(watched))
      if (!(key in window.__seen) && document.querySelector(selector)) window.__seen[key] = performance.now();
  }).observe(document, { childList: true, subtree: true, attributes: true, attributeFilter: ["style"] });
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) window.__longTasks.push(e.duration);
  }).observe({ type: "longtask", buffered: true });
}, process.env.PORPOISE_TOKEN);

const out = {};

// 1. a 1,000-task instance: navigation start -> task table filled (interactive) and graph drawn; cold =
// a fresh page load (layout computed in the worker), warm = coming back within the app (layout cached in
// memory), reload = a new page load of the same instance (layout cached in IndexedDB)
const measure = async (key, since) => {
  await page.locator('[data-testid="task-table"] [role="row"]').first().waitFor();
  await page.locator(".react-flow__node").first().waitFor();
  const t = await page.evaluate(() => ({
    table: window.__seen.table,
    graph: window.__seen.graph,
    longest: Math.max(0, ...window.__longTasks),
    blocked: window.__longTasks.reduce((a, b) => a + Math.max(0, b - 50), 0),
  }));
  const layouts = await page.evaluate(() =>
    performance
      .getEntriesByType("measure")
      .filter((m) => m.name.startsWith("porpoise:layout:"))
      .map((m) => [m.startTime, m.duration]),
  );
  const last = layouts.filter(([start]) => start >= since).pop();
  if (last)
    [out[`${key}_layout_start_ms`], out[`${key}_layout_ms`]] = last.map((v, i) =>
      Math.round(v - (i ? 0 : since)),
    );
  out[`${key}_table_ms`] = Math.round(t.table - since);
  out[`${key}_graph_ms`] = Math.round(t.graph - since);
  out[`${key}_longest_task_ms`] = Math.round(t.longest);
  out[`${key}_blocking_ms`] = Math.round(t.blocked);
};
await page.goto(`${url}/instances/${process.env.BIG_INSTANCE}`);
await measure("instance_1000_cold", 0);
if (process.env.WATERFALL)
  // what the cold page fetched, when (start and end, ms since navigation): the requests that come before the
  // instance's own are what delays the table
  out.instance_1000_cold_waterfall = await page.evaluate(() =>
    performance
      .getEntriesByType("resource")
      .map((e) => [e.name.replace(location.origin, ""), Math.round(e.startTime), Math.round(e.responseEnd)]),
  );
out.instance_1000_dom_rows = await page.locator('[data-testid="task-table"] [role="row"]').count();
out.instance_1000_dom_nodes = await page.locator(".react-flow__node").count();
await page.getByRole("link", { name: "Overview" }).first().click();
await page.getByTestId("recent-failures").waitFor();
const back = await page.evaluate(() => {
  window.__longTasks.length = 0;
  window.__seen = {};
  history.back();
  return performance.now();
});
await measure("instance_1000_warm", back);
await page.reload(); // a new page load: the layout comes from IndexedDB
await measure("instance_1000_reload", 0);

// 2. the editor on the same 1,000-task workflow: open (graph drawn, its layout cached by version), add a
// task, link it by dragging, lay the whole graph out again; the longest main-thread task meanwhile
const since = async () => page.evaluate(() => performance.now());
const until = async (at) => Math.round((await since()) - at);
await page.evaluate(() => (window.__longTasks.length = 0));
let at = await since();
await page.goto(`${url}/workflows/${process.env.BIG_WORKFLOW}/edit`);
await page.locator('[data-testid="edit-graph"]:not([data-layouts="0"]) .react-flow__node').first().waitFor();
out.editor_1000_open_ms = await until(0);
if (process.env.WATERFALL)
  out.editor_1000_waterfall = await page.evaluate(() =>
    performance
      .getEntriesByType("resource")
      .map((e) => [e.name.replace(location.origin, ""), Math.round(e.startTime), Math.round(e.responseEnd)]),
  );
out.editor_1000_dom_nodes = await page.locator(".react-flow__node").count();
at = await since();
await page.getByRole("button", { name: "Add task" }).click();
await page.getByTestId("node-shell_1").waitFor();
out.editor_1000_add_ms = await until(at);
const handle = async (node, side) => {
  const box = await page.locator(`[data-testid="node-${node}"] .react-flow__handle-${side}`).boundingBox();
  return { x: box.x + box.width / 2, y: box.y + box.height / 2 };
};
// from a task drawn on screen (the big graph draws only what is in view)
const source = await page
  .locator('.react-flow__node:not([data-id="shell_1"])')
  .first()
  .getAttribute("data-id");
const from = await handle(source, "right");
const to = await handle("shell_1", "left");
await page.mouse.move(from.x, from.y);
await page.mouse.down();
await page.mouse.move(to.x, to.y, { steps: 8 });
at = await since();
await page.mouse.up();
await page.getByTestId(`rf__edge-${source}->shell_1`).waitFor({ state: "attached" });
out.editor_1000_connect_ms = await until(at);
at = await since();
await page.getByRole("button", { name: "Auto layout" }).click();
await page.locator('[data-testid="edit-graph"][data-layouts="2"]').waitFor();
out.editor_1000_relayout_ms = await until(at);
out.editor_1000_longest_task_ms = Math.round(await page.evaluate(() => Math.max(0, ...window.__longTasks)));

// 3. the instances list: its API answer received -> rows on screen
await page.goto(`${url}/overview`);
await page.getByRole("link", { name: "Instances" }).first().waitFor();
const answered = page.waitForResponse((r) => r.url().includes("/api/v1/instances?"));
const streaming = page.waitForResponse((r) => r.url().includes("/api/v1/events"));
await page.getByRole("link", { name: "Instances" }).first().click();
await answered;
const t0 = await page.evaluate(() => performance.now());
await page.getByTestId("instances").locator("tbody tr").first().waitFor();
out.list_after_data_ms = Math.round((await page.evaluate(() => performance.now())) - t0);

// 4. a state change in the database -> on screen
const flip = process.env.FLIP_INSTANCE;
await page.getByTestId(`instance-${flip}`).locator('[data-state="SUCCESS"]').waitFor();
await streaming; // the page's live stream is open
console.log("READY");
const input = createInterface({ input: process.stdin });
const line = await new Promise((resolve) => input.once("line", resolve));
input.close(); // an open stdin would keep node running
const committed = Number(String(line).split(" ")[1]);
await page.getByTestId(`instance-${flip}`).locator('[data-state="FAILURE"]').waitFor();
out.state_change_on_screen_ms = Date.now() - committed;

console.log(JSON.stringify(out));
await close();
