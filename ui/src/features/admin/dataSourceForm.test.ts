import { describe, expect, it } from "vitest";

import { ApiError } from "../../api/client";
import { emptyForm, formOf, parseOther, sourceBody, storedSecrets, withType } from "./dataSourceForm";

describe("data source form", () => {
  it("sets the type's default port, keeping a port the user typed", () => {
    const pg = emptyForm();
    expect(pg.port).toBe("5432");
    expect(withType(pg, "MYSQL").port).toBe("3306");
    expect(withType(withType(pg, "CLICKHOUSE"), "HIVE").port).toBe("10000");
    expect(withType({ ...pg, port: "6543" }, "MYSQL").port).toBe("6543");
    expect(withType({ ...pg, dsn: "postgresql://x/y" }, "MYSQL").dsn).toBe("");
  });

  it("keeps the stored password when an edit leaves it empty, and never sends one it did not get", () => {
    const stored = {
      name: "wh",
      type: "MYSQL",
      params: { host: "db", port: 3307, database: "d", user: "u", password: "***" },
    };
    const form = formOf(stored);
    expect(form).toMatchObject({ name: "wh", type: "MYSQL", host: "db", port: "3307", password: "" });
    const secrets = storedSecrets(stored.params);
    expect(sourceBody(form, secrets)).toEqual({
      type: "MYSQL",
      params: { host: "db", port: 3307, database: "d", user: "u", password: "***" },
    });
    expect(sourceBody({ ...form, password: "new" }, secrets).params.password).toBe("new");
    expect("password" in sourceBody(emptyForm(), null).params).toBe(false);
  });

  it("sends no port for a source saved without one (the type's default applies, the password is kept)", () => {
    const form = formOf({ name: "x", type: "POSTGRESQL", params: { host: "h", password: "***" } });
    expect(form.port).toBe("");
    expect("port" in sourceBody(form, { password: true, dsn: false }).params).toBe(false);
  });

  it("a POSTGRESQL DSN replaces host, port and database, and a stored one is kept", () => {
    const body = sourceBody({ ...emptyForm(), name: "p", dsn: "postgresql://u:pw@h/d" }, null);
    expect(body.params).toEqual({ dsn: "postgresql://u:pw@h/d", user: "" });
    const kept = sourceBody(formOf({ name: "p", type: "POSTGRESQL", params: { dsn: "***" } }), {
      password: false,
      dsn: true,
    });
    expect(kept.params.dsn).toBe("***");
  });

  it("reads session settings as name=value lines and names a bad line at params.other", () => {
    expect(parseOther("search_path = etl\nmax_threads=2\n\nflag=true")).toEqual({
      search_path: "etl",
      max_threads: 2,
      flag: true,
    });
    expect(() => parseOther("oops")).toThrow(ApiError);
    try {
      sourceBody({ ...emptyForm(), other: "oops" }, null);
    } catch (exc) {
      expect((exc as ApiError).field).toBe("params.other");
    }
    expect(() => sourceBody({ ...emptyForm(), port: "70000" }, null)).toThrow(/1 to 65535/);
    expect(formOf({ name: "c", type: "CLICKHOUSE", params: { other: { max_threads: 2 } } }).other).toBe(
      "max_threads=2",
    );
  });
});
