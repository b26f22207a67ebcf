import { describe, expect, it } from "vitest";

import { contentPath, crumbs, formatBytes, joinPath, parentOf, percent } from "./paths";

describe("resource paths", () => {
  it("breadcrumbs, joins and parents", () => {
    expect(crumbs("etl/daily")).toEqual([
      { name: "etl", path: "etl" },
      { name: "daily", path: "etl/daily" },
    ]);
    expect(crumbs("")).toEqual([]);
    expect(joinPath("etl/", "/clean.py")).toBe("etl/clean.py");
    expect(joinPath("", "a.sh")).toBe("a.sh");
    expect(parentOf("etl/daily/a.sql")).toBe("etl/daily");
    expect(parentOf("a.sql")).toBe("");
  });

  it("sizes, content URLs and upload percentages", () => {
    expect(formatBytes(1023)).toBe("1023 B");
    expect(formatBytes(1536)).toBe("1.5 KiB");
    expect(formatBytes(12 * 1024 * 1024)).toBe("12 MiB");
    expect(formatBytes(undefined)).toBe("—");
    expect(contentPath("my etl", "a b/c.py", 2)).toBe(
      "/api/v1/projects/my%20etl/resources/content?path=a+b%2Fc.py&version=2",
    );
    expect(percent(50, 200)).toBe(25);
    expect(percent(5, 0)).toBe(0);
    expect(percent(300, 200)).toBe(100);
  });
});
