// The resource center screen in real headless Chromium against a live API server (tests/test_ui_e2e.py):
// a bad path refused at the field; a file uploaded (progress to 100%) into a new folder, uploaded again (version
// 2), version 1 restored (version 3, "restored from 1") and downloaded byte for byte; the folder reached by
// the breadcrumb; a file a workflow uses shows that workflow and its delete is refused with the server's reason;
// an unused file deleted. axe-core on the screen.
// Environment: PORPOISE_URL, E2E_USER / E2E_PASSWORD (an admin), E2E_TAG, E2E_USED (a file of project ui-e2e
// that E2E_USER_WORKFLOW uses), E2E_SCREENSHOTS (optional), CHROMIUM.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { violations } from "./a11y.mjs";
import { launch, reportFailure } from "./browser.mjs";

const url = process.env.PORPOISE_URL;
const tag = process.env.E2E_TAG;
const shots = process.env.E2E_SCREENSHOTS;
const { page, close } = await launch({ acceptDownloads: true });
page.setDefaultTimeout(60_000);
const pageErrors = [];
page.on("pageerror", (err) => pageErrors.push(String(err)));
const a11y = [];
let step = "start";
const folder = `e2e_${tag}`;
const path = `${folder}/clean.py`;
const first = `print("first ${tag}")\n`;
const second = `print("second ${tag}")\n`.repeat(2000);

const upload = async (name, content) => {
  await page
    .getByLabel("File", { exact: true })
    .setInputFiles({ name, mimeType: "text/x-python", buffer: Buffer.from(content) });
};

try {
  step = "sign in and open the project's resources";
  await page.goto(`${url}/signin?next=${encodeURIComponent("/resources?project=ui-e2e")}`);
  await page.getByLabel("User").fill(process.env.E2E_USER);
  await page.getByLabel("Password").fill(process.env.E2E_PASSWORD);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByTestId("resource-listing").waitFor();

  step = "a bad path is refused at the field";
  await upload("clean.py", first);
  const pathInput = page.getByLabel("Path in the project");
  if ((await pathInput.inputValue()) !== "clean.py") throw new Error("the path is not the file's name");
  await pathInput.fill(`${folder}/../clean.py`);
  await page.getByRole("button", { name: "Upload", exact: true }).click();
  await page.getByTestId("resource-upload").getByRole("alert").waitFor();
  if ((await pathInput.getAttribute("aria-invalid")) !== "true")
    throw new Error("the refused path is not marked");

  step = "upload into a new folder, then a second version";
  await pathInput.fill(path);
  await page.getByRole("button", { name: "Upload", exact: true }).click();
  await page
    .getByTestId("upload-status")
    .filter({ hasText: `${path}: version 1 stored` })
    .waitFor();
  if ((await page.getByLabel("Upload progress").getAttribute("value")) !== "100")
    throw new Error("the progress did not reach 100%");
  await page.getByTestId(`resource-folder-${folder}`).waitFor();
  await upload("clean.py", second);
  await pathInput.fill(path);
  await page.getByRole("button", { name: "Upload", exact: true }).click();
  await page
    .getByTestId("upload-status")
    .filter({ hasText: `${path}: version 2 stored` })
    .waitFor();

  step = "restore version 1 (a version 3), download version 1";
  const detail = page.getByRole("region", { name: `File ${path}` });
  await detail.getByTestId("resource-version-2").waitFor();
  await detail.getByRole("button", { name: "Restore version 1" }).click();
  await detail.getByTestId("resource-version-3").filter({ hasText: "restored from 1" }).waitFor();
  const [download] = await Promise.all([
    page.waitForEvent("download"),
    detail.getByRole("link", { name: "Download version 1" }).click(),
  ]);
  if (shots) await page.screenshot({ path: join(shots, "resources.png"), fullPage: true });
  const saved = await download.path();
  if (readFileSync(saved, "utf8") !== first) throw new Error("version 1 downloaded other bytes");

  step = "the folder by its row, back to the top by the breadcrumb";
  await page.getByTestId(`resource-folder-${folder}`).getByRole("button").first().click();
  await page.getByTestId(`resource-file-${path}`).waitFor();
  await a11y.push(...(await violations(page, "resources", "resources")));
  await page.getByRole("button", { name: "Open folder (top)" }).click();
  await page.getByTestId(`resource-folder-${folder}`).waitFor();

  step = "a used file shows its workflow and its delete is refused with the reason";
  const used = process.env.E2E_USED;
  const usedFolder = used.split("/")[0];
  await page.getByTestId(`resource-folder-${usedFolder}`).getByRole("button").first().click();
  const usedRow = page.getByTestId(`resource-file-${used}`);
  await usedRow.getByRole("button", { name: used.split("/").pop(), exact: true }).click();
  await page
    .getByRole("region", { name: `File ${used}` })
    .getByTestId("resource-references")
    .getByText(process.env.E2E_USER_WORKFLOW)
    .waitFor();
  await usedRow.getByRole("button", { name: `Delete ${used}` }).click();
  await page.getByTestId("resources").getByRole("alert").filter({ hasText: "used by" }).waitFor();

  step = "an unused file deleted";
  await page.getByRole("button", { name: "Open folder (top)" }).click();
  await page.getByTestId(`resource-folder-${folder}`).getByRole("button").first().click();
  await page.getByRole("button", { name: `Delete ${path}` }).click();
  await page.getByTestId(`resource-file-${path}`).waitFor({ state: "detached" });

  if (a11y.length) throw new Error(`accessibility violations:\n${a11y.join("\n")}`);
  if (pageErrors.length) throw new Error(`uncaught page errors: ${pageErrors.join("; ")}`);
  console.log("resources: all steps passed");
} catch (err) {
  await reportFailure("resources", page, step, err, pageErrors);
} finally {
  await close();
}
