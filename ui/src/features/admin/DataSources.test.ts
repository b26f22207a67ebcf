import { describe, expect, it } from "vitest";

import { sourceBody } from "./DataSources";

const fields = { name: "wh", host: "db", port: "5433", database: "d", user: "u", password: "" };

describe("data source form", () => {
  it("keeps the stored password when an edit leaves it empty, and never sends one it did not get", () => {
    expect(sourceBody(fields, true).params).toEqual({
      host: "db",
      port: 5433,
      database: "d",
      user: "u",
      password: "***",
    });
    expect(sourceBody(fields, false).params.password).toBe("");
    expect(sourceBody({ ...fields, password: "new" }, true).params.password).toBe("new");
  });
});
