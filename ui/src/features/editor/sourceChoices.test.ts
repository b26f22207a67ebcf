import { describe, expect, it } from "vitest";

import { fieldsOf } from "./schemaFields";
import { usableSources, withSourceChoices } from "./sourceChoices";

const sources = [
  { name: "wh", type: "POSTGRESQL" },
  { name: "shop", type: "MYSQL" },
  { name: "lake", type: "HIVE" },
  { name: "events", type: "CLICKHOUSE" },
];
const fields = fieldsOf({
  properties: { datasource: { type: "string" }, sql: { type: "string" } },
  required: ["datasource", "sql"],
});

describe("data source choices of SQL and PROCEDURE tasks", () => {
  it("offers the types the task runs on, and the task's own type alone when it gives one", () => {
    expect(usableSources("SQL", {}, sources)).toEqual(["events", "lake", "shop", "wh"]);
    expect(usableSources("PROCEDURE", {}, sources)).toEqual(["shop", "wh"]);
    expect(usableSources("SQL", { type: "hive" }, sources)).toEqual(["lake"]);
  });

  it("turns the datasource field into a choice, keeping a value that is not one so it shows", () => {
    const [ds, sql] = withSourceChoices(fields, "PROCEDURE", { datasource: "gone" }, sources);
    expect(ds).toMatchObject({ name: "datasource", kind: "choice", options: ["gone", "shop", "wh"] });
    expect(sql?.kind).toBe("text");
    expect(withSourceChoices(fields, "PROCEDURE", { datasource: "wh" }, sources)[0]?.options).toEqual([
      "shop",
      "wh",
    ]);
  });

  it("leaves other task types, and the field before the list has loaded, as they are", () => {
    expect(withSourceChoices(fields, "SHELL", {}, sources)).toEqual(fields);
    expect(withSourceChoices(fields, "SQL", {}, undefined)).toEqual(fields);
  });
});
