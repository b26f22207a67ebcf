// Time zones and instance filters in real headless Chromium (tests/test_ui_e2e_time.py; the browser's zone is
// UTC): a schedule `0 2 * * *` in Asia/Shanghai lists its next fire in its own zone and the viewer's; the
// header's display-zone switch refuses an unknown zone at the field, moves every time, and is kept over a
// reload; the instances list filtered by workflow name (from the autocomplete), run type, business date typed
// in the display zone, host and state, kept in the URL over a reload; 中文 picked in the header (kept over a
// reload, <html lang> follows, dates per locale) and English again. axe-core on each screen.
// Environment: PORPOISE_URL, E2E_USER / E2E_PASSWORD (an admin), E2E_WORKFLOW (code) and E2E_NAME of a workflow
// with that schedule, one manual run E2E_MANUAL and backfill runs E2E_EARLY (2026-03-01) and E2E_LATE
// (2026-03-05) on E2E_HOST, E2E_SCREENSHOTS (optional), CHROMIUM.
import { join } from "node:path";
import { violations } from "./a11y.mjs";
import { launch, reportFailure } from "./browser.mjs";

const url = process.env.PORPOISE_URL;
const env = process.env;
const shots = env.E2E_SCREENSHOTS;
const { page, close } = await launch();
page.setDefaultTimeout(60_000);
const pageErrors = [];
page.on("pageerror", (err) => pageErrors.push(String(err)));
const a11y = [];
const audit = async (name, route) => a11y.push(...(await violations(page, name, route)));
const shot = async (name) => {
  if (shots) await page.screenshot({ path: join(shots, `${name}.png`), fullPage: true });
};
const row = (id) => page.getByTestId(`instance-${id}`);
/** Exactly the instances ``ids`` are listed. */
const listed = async (ids) => {
  for (const id of ids) await row(id).waitFor();
  await page.waitForFunction(
    (n) =>
      document.querySelectorAll('[data-testid="instances"] tbody tr[data-testid^="instance-"]').length === n,
    ids.length,
  );
};
const search = () => new URL(page.url()).searchParams;
let step = "start";

try {
  step = "sign in and open the workflow";
  await page.goto(`${url}/signin?next=${encodeURIComponent(`/workflows/${env.E2E_WORKFLOW}`)}`);
  await page.getByLabel("User").fill(env.E2E_USER);
  await page.getByLabel("Password").fill(env.E2E_PASSWORD);
  await page.getByRole("button", { name: "Sign in" }).click();

  step = "the schedule's next fire: 02:00 in Asia/Shanghai, 18:00 UTC for the viewer";
  const zone = page.getByLabel("Display time zone");
  await zone.selectOption("UTC");
  const next = page.getByTestId("schedules").locator('[data-testid^="next-fire-"]');
  await next
    .filter({ hasText: "02:00:00 Asia/Shanghai" })
    .filter({ hasText: "18:00:00 UTC for you" })
    .waitFor();
  await audit("workflow (schedules)", "workflows/:code");

  step = "the preview of the schedule shows both zones";
  await page.getByTestId("schedules").getByRole("button", { name: "Edit" }).click();
  const fires = page.getByTestId("next-fires");
  await fires.getByRole("columnheader", { name: "In the schedule's zone (Asia/Shanghai)" }).waitFor();
  await fires.getByRole("columnheader", { name: "In your display zone (UTC)" }).waitFor();
  await fires
    .getByText(/18:00:00 UTC$/)
    .first()
    .waitFor();
  await shot("schedule-zones");
  await page.getByRole("button", { name: "Cancel" }).click();

  step = "the display-zone switch: an unknown zone refused at the field";
  await zone.selectOption("other");
  const field = page.getByLabel("IANA time zone");
  await field.fill("Mars/Olympus");
  await field.press("Enter");
  await page.getByRole("alert").filter({ hasText: "“Mars/Olympus” is not an IANA time zone" }).waitFor();
  if ((await field.getAttribute("aria-invalid")) !== "true")
    throw new Error("the refused zone is not marked");

  step = "Asia/Shanghai chosen: every time moves, and the choice survives a reload";
  await field.fill("Asia/Shanghai");
  await field.press("Enter");
  await next.filter({ hasText: "02:00:00 UTC+8 for you" }).waitFor();
  await page.reload();
  await next.filter({ hasText: "02:00:00 UTC+8 for you" }).waitFor();
  if ((await zone.inputValue()) !== "chosen") throw new Error("the chosen zone was not kept");

  step = "instances filtered by workflow name from the autocomplete";
  await page.goto(`${url}/instances`);
  const name = page.getByLabel("Filter by workflow name");
  await name.fill(env.E2E_NAME.slice(0, -2));
  await page.locator(`#workflow-names option[value="${env.E2E_NAME}"]`).waitFor({ state: "attached" });
  await name.fill(env.E2E_NAME);
  await name.press("Enter");
  await listed([env.E2E_MANUAL, env.E2E_EARLY, env.E2E_LATE]);

  step = "run type backfill";
  await page.getByLabel("Filter by run type").selectOption("backfill");
  await listed([env.E2E_EARLY, env.E2E_LATE]);

  step = "business date from 2026-03-02 08:00 in Asia/Shanghai (00:00 UTC)";
  await page.getByText("Business date from (UTC+8)").waitFor();
  const from = page.getByLabel("Business date from");
  await from.fill("2026-03-02 08:00");
  await from.press("Enter");
  await listed([env.E2E_LATE]);
  if (search().get("schedule_since") !== "2026-03-02T00:00:00Z")
    throw new Error(`schedule_since in the URL: ${search().get("schedule_since")}`);
  await row(env.E2E_LATE).filter({ hasText: "08:00:00 UTC+8" }).waitFor();

  step = "a date that is not one: said at the field, not sent";
  const until = page.getByLabel("Business date to");
  await until.fill("2026-02-30");
  await until.press("Enter");
  await page.getByRole("alert").filter({ hasText: "“2026-02-30” is not a date" }).waitFor();
  if (search().has("schedule_until")) throw new Error("a bad date reached the URL");
  await until.fill("");
  await until.press("Enter");

  step = "host and state";
  await page.getByLabel("Filter by host").fill(env.E2E_HOST);
  await page.getByLabel("Filter by host").press("Enter");
  await page.getByLabel("Filter by state").selectOption("SUCCESS");
  await listed([env.E2E_LATE]);
  await audit("instances (filtered)", "instances");
  await shot("instances-filters");

  step = "a reload keeps every filter";
  await page.reload();
  await listed([env.E2E_LATE]);
  if ((await page.getByLabel("Filter by workflow name").inputValue()) !== env.E2E_NAME)
    throw new Error("the workflow name was not kept");
  if ((await page.getByLabel("Business date from").inputValue()) !== "2026-03-02 08:00")
    throw new Error("the business date was not kept");
  if ((await page.getByLabel("Filter by run type").inputValue()) !== "backfill")
    throw new Error("the run type was not kept");

  step = "clear";
  await page.getByRole("button", { name: "Clear filters" }).click();
  await row(env.E2E_MANUAL).waitFor();

  step = "中文 picked in the header: the page re-renders in Chinese, <html lang> follows";
  await page.getByLabel("Language").selectOption("zh-CN");
  await page.getByRole("heading", { level: 1, name: "工作流实例" }).waitFor();
  if ((await page.evaluate(() => document.documentElement.lang)) !== "zh-CN")
    throw new Error("<html lang> did not follow the language");

  step = "中文 kept over a reload: states, run types and dates in Chinese";
  await page.reload();
  await page.getByRole("heading", { level: 1, name: "工作流实例" }).waitFor();
  await page.getByRole("navigation", { name: "主导航" }).getByRole("link", { name: "概览" }).waitFor();
  await page.getByLabel("按运行类型筛选").waitFor();
  // zh-CN writes dates year/month/day, 24-hour, still in the display zone (Asia/Shanghai)
  await row(env.E2E_LATE).filter({ hasText: "成功" }).filter({ hasText: "补数" }).waitFor();
  await row(env.E2E_LATE).filter({ hasText: "2026/3/5 08:00:00 UTC+8" }).waitFor();
  await audit("instances (中文)", "instances");
  await shot("zh");

  step = "中文 on the overview and the workflow page";
  await page.getByRole("link", { name: "概览" }).click();
  await page.getByRole("heading", { level: 1, name: "概览" }).waitFor();
  await page.getByRole("heading", { name: "最近 24 小时" }).waitFor();
  await audit("overview (中文)", "overview");
  await page.goto(`${url}/workflows/${env.E2E_WORKFLOW}`);
  await next.filter({ hasText: /你的时间 \d{4}\/\d{1,2}\/\d{1,2} 02:00:00 UTC\+8）/ }).waitFor();
  await audit("workflow (中文)", "workflows/:code");

  step = "English again without a reload";
  await page.getByLabel("语言").selectOption("en");
  await next.filter({ hasText: "02:00:00 UTC+8 for you)" }).waitFor();
  if ((await page.evaluate(() => document.documentElement.lang)) !== "en")
    throw new Error("<html lang> did not go back to en");

  if (a11y.length) throw new Error(`accessibility violations:\n${a11y.join("\n")}`);
  if (pageErrors.length) throw new Error(`uncaught page errors: ${pageErrors.join("; ")}`);
  console.log("timezones: all steps passed");
} catch (err) {
  await reportFailure("timezones", page, step, err, pageErrors);
} finally {
  await close();
}
