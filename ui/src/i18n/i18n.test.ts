// The i18n layer's completeness: every strings module's objects have a Chinese translation, and no key is
// missing or empty in either language (a missing Chinese key also fails `tsc`).
import { afterEach, beforeAll, describe, expect, it } from "vitest";

import { loadLocale } from "./catalog";
import { formatNumber, locale, setLocale, translations } from "./index";

// the Chinese dictionaries, loaded as the header's switch loads them
beforeAll(() => loadLocale("zh-CN"));

const modules = import.meta.glob(["../**/strings.ts", "../**/*Strings.ts"], { eager: true }) as Record<
  string,
  Record<string, unknown>
>;

function problems(english: unknown, chinese: unknown, path: string): string[] {
  if (typeof english === "string") {
    const out: string[] = [];
    if (!english.trim()) out.push(`${path}: empty in English`);
    if (typeof chinese !== "string") out.push(`${path}: missing in Chinese`);
    else if (!chinese.trim()) out.push(`${path}: empty in Chinese`);
    return out;
  }
  if (typeof english === "function") {
    if (typeof chinese !== "function") return [`${path}: missing in Chinese`];
    return chinese.length === english.length
      ? []
      : [`${path}: takes ${english.length} argument(s) in English`];
  }
  if (english && typeof english === "object") {
    if (!chinese || typeof chinese !== "object") return [`${path}: missing in Chinese`];
    const out: string[] = [];
    for (const [key, value] of Object.entries(english))
      out.push(...problems(value, (chinese as Record<string, unknown>)[key], `${path}.${key}`));
    for (const key of Object.keys(chinese))
      if (!(key in english)) out.push(`${path}.${key}: in Chinese only`);
    return out;
  }
  return [];
}

afterEach(() => setLocale("en"));

describe("the i18n layer", () => {
  it("has every key of every registered object in both languages, none empty", () => {
    const found = translations().flatMap((entry, i) => problems(entry.english, entry.chinese, `#${i}`));
    expect(found).toEqual([]);
  });

  it("sees the completeness check fail on a missing or empty key", () => {
    expect(problems({ a: "A", b: { c: "C" } }, { a: "", b: {} }, "t")).toEqual([
      "t.a: empty in Chinese",
      "t.b.c: missing in Chinese",
    ]);
  });

  it("translates every object each strings module exports", () => {
    const registered = new Set(translations().map((entry) => entry.target));
    const untranslated: string[] = [];
    for (const [file, exports] of Object.entries(modules))
      for (const [name, value] of Object.entries(exports))
        if (value && typeof value === "object" && !registered.has(value))
          untranslated.push(`${file}: ${name}`);
    expect(untranslated).toEqual([]);
    expect(Object.keys(modules).length).toBeGreaterThan(5);
  });

  it("switches every registered string and back", () => {
    const [entry] = translations();
    expect(entry).toBeDefined();
    const target = entry!.target as Record<string, unknown>;
    const key = Object.keys(entry!.english).find((k) => typeof entry!.english[k] === "string")!;
    expect(locale()).toBe("en");
    setLocale("zh-CN");
    expect(target[key]).toBe(entry!.chinese[key]);
    expect(document.documentElement.lang).toBe("zh-CN");
    expect(localStorage.getItem("porpoise.locale")).toBe("zh-CN");
    setLocale("en");
    expect(target[key]).toBe(entry!.english[key]);
    expect(document.documentElement.lang).toBe("en");
  });

  it("formats numbers per locale", () => {
    expect(formatNumber(12345.5, 1)).toBe("12,345.5");
    setLocale("zh-CN");
    expect(formatNumber(12345.5, 1)).toBe("12,345.5");
  });
});
