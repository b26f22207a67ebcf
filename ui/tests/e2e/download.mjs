// A task's log downloaded from the log page in real headless Chromium, signed in with a password (the session
// cookie authenticates the GET): the Download control is a plain link to the API's streaming endpoint, the
// page itself never fetches the file (the browser streams it to disk), and the file is saved where the test
// asks, which then compares it with the log (tests/test_ui_e2e.py).
// Environment: PORPOISE_URL, E2E_USER, E2E_PASSWORD, E2E_TASK (a finished task with a long log),
// E2E_DOWNLOAD_TO (a file path), CHROMIUM.
import { launch, reportFailure } from "./browser.mjs";

const url = process.env.PORPOISE_URL;
const task = process.env.E2E_TASK;
const { page, close } = await launch({ acceptDownloads: true });
page.setDefaultTimeout(60_000);
const pageErrors = [];
page.on("pageerror", (err) => pageErrors.push(String(err)));
const fetched = [];
page.on("request", (r) => {
  if (r.url().includes("/log/download") && ["fetch", "xhr"].includes(r.resourceType())) fetched.push(r.url());
});
let step = "start";

try {
  step = "sign in with user and password";
  await page.goto(`${url}/signin?next=/tasks/${task}/log`);
  await page.getByLabel("User").fill(process.env.E2E_USER);
  await page.getByLabel("Password").fill(process.env.E2E_PASSWORD);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.waitForURL(new RegExp(`/tasks/${task}/log$`));
  await page.getByTestId("log-status").filter({ hasText: "(complete)" }).waitFor();

  step = "the Download control links to the streaming endpoint";
  const link = page.getByRole("link", { name: "Download" });
  const href = new URL(await link.getAttribute("href"), page.url());
  if (href.pathname !== `/api/v1/tasks/${task}/log/download` || href.origin !== new URL(url).origin)
    throw new Error(`the download link points to ${href}`);
  if ((await link.getAttribute("download")) === null) throw new Error("the link has no download attribute");

  step = "clicking it downloads the file (the browser's download, not the page's memory)";
  const [download] = await Promise.all([page.waitForEvent("download"), link.click()]);
  const failure = await download.failure();
  if (failure) throw new Error(`the download failed: ${failure}`);
  await download.saveAs(process.env.E2E_DOWNLOAD_TO);
  if (!/\.log$/.test(download.suggestedFilename()))
    throw new Error(`file name ${download.suggestedFilename()}`);
  if (fetched.length) throw new Error(`the page fetched the log itself: ${fetched.join(", ")}`);
  if (pageErrors.length) throw new Error(`uncaught page errors: ${pageErrors.join("; ")}`);
  console.log(`download: all steps passed (${download.suggestedFilename()})`);
} catch (err) {
  await reportFailure("download", page, step, err, pageErrors);
} finally {
  await close();
}
