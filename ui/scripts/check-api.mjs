// Fails when src/api/generated/schema.ts is not what openapi-typescript makes of openapi.json
// (tests/test_ui_build.py checks that openapi.json is the API server's current document).
import { readFileSync } from "node:fs";
import openapiTS, { astToString } from "openapi-typescript";

const spec = new URL("../openapi.json", import.meta.url);
const committed = readFileSync(new URL("../src/api/generated/schema.ts", import.meta.url), "utf8");
const fresh = astToString(await openapiTS(spec));
const strip = (text) => text.replace(/^\/\*\*[\s\S]*?\*\/\s*/, "").trim();
if (strip(fresh) !== strip(committed)) {
  console.error("src/api/generated/schema.ts is stale: run `make ui-api` and commit the result");
  process.exit(1);
}
