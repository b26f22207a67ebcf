// The UI's one i18n layer: English (the source) and Simplified Chinese, a typed layer of ~100 lines instead of
// i18next: the strings already live in per-feature modules as plain objects, so the layer keeps that shape
// (no key strings, no t("a.b") lookups to mistype) and adds no bundle weight. A missing or mistyped Chinese key
// fails `tsc` (the dictionary must satisfy Translation<typeof english>); an empty one fails i18n.test.ts.
//
// How a strings module becomes translatable (and how to add a string):
//   1. English stays where it is: `export const tThing = { label: "Label", count: (n: number) => `${n} runs` }`
//      in the feature's strings.ts (components read `tThing.label` at render, as before).
//   2. The Chinese sits beside it in strings.zh.ts:
//        import { translation } from "../../i18n";
//        import { tThing } from "./strings";
//        translation(tThing, { label: "标签", count: (n) => `${n} 次运行` });
//      and every strings.zh.ts is imported by i18n/zh.ts, the Chinese chunk i18n/catalog.ts loads when Chinese
//      is first wanted (the initial JavaScript carries English alone).
//   3. A new key in English without its Chinese fails `tsc`; a strings module none of the catalogue's
//      translations covers fails i18n.test.ts; a literal in JSX text or aria-label/title/placeholder/alt fails
//      `npm run lint` (eslint.config.js).
// Switching the language swaps the values of every registered object in place and re-mounts the routed app
// (main.tsx keys it on the locale): the server's data stays cached, nothing is fetched again.
import { useSyncExternalStore } from "react";

export type Locale = "en" | "zh-CN";
export const LOCALES: readonly Locale[] = ["en", "zh-CN"];
export const LOCALE_KEY = "porpoise.locale";

/** The shape a translation of ``T`` must have: every string a string, every function the same parameters. */
export type Translation<T> = T extends string
  ? string
  : T extends (...args: infer A) => infer R
    ? (...args: A) => Translation<R>
    : T extends object
      ? { readonly [K in keyof T]: Translation<T[K]> }
      : T;

type Dict = Record<string, unknown>;

interface Entry {
  target: Dict;
  english: Dict;
  chinese: Dict;
}

const entries: Entry[] = [];

function snapshot(value: Dict): Dict {
  const copy: Dict = {};
  for (const [key, item] of Object.entries(value))
    copy[key] = item && typeof item === "object" ? snapshot(item as Dict) : item;
  return copy;
}

function assign(target: Dict, source: Dict): void {
  for (const [key, item] of Object.entries(source)) {
    const into = target[key];
    if (item && typeof item === "object" && into && typeof into === "object")
      assign(into as Dict, item as Dict);
    else target[key] = item;
  }
}

/** Register the Chinese of a strings object (its English is the object itself). */
export function translation<T extends object>(english: T, chinese: Translation<T>): void {
  const entry = { target: english as Dict, english: snapshot(english as Dict), chinese: chinese as Dict };
  entries.push(entry);
  if (current !== "en") assign(entry.target, entry.chinese);
}

/** Every registered (English, Chinese) pair: for the completeness test. */
export function translations(): readonly { target: object; english: Dict; chinese: Dict }[] {
  return entries;
}

function pick(language: string | undefined | null): Locale | null {
  if (!language) return null;
  const lower = language.toLowerCase();
  if (lower === "en" || lower.startsWith("en-")) return "en";
  // Simplified Chinese; a Traditional reader (zh-TW, zh-Hant) still reads it better than English
  if (lower === "zh" || lower.startsWith("zh-")) return "zh-CN";
  return null;
}

function initial(): Locale {
  try {
    const kept = pick(globalThis.localStorage?.getItem(LOCALE_KEY));
    if (kept) return kept;
  } catch {
    // storage refused (private mode): the browser's language
  }
  const languages = globalThis.navigator?.languages ?? [globalThis.navigator?.language];
  for (const language of languages) {
    const found = pick(language);
    if (found) return found;
  }
  return "en";
}

let current: Locale = initial();
const listeners = new Set<() => void>();

export function locale(): Locale {
  return current;
}

function applyDocument(): void {
  if (globalThis.document) globalThis.document.documentElement.lang = current;
}
applyDocument();

/** Switch every string, date and number to ``next``, keep the choice, and re-render whoever listens. */
export function setLocale(next: Locale): void {
  if (next === current) return;
  current = next;
  for (const entry of entries) assign(entry.target, next === "en" ? entry.english : entry.chinese);
  try {
    globalThis.localStorage?.setItem(LOCALE_KEY, next);
  } catch {
    // not kept: still applies to this tab
  }
  applyDocument();
  listeners.forEach((listener) => listener());
}

/** The active locale; the component re-renders when the header's switch changes it. */
export function useLocale(): Locale {
  return useSyncExternalStore(
    (listener) => {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    locale,
    locale,
  );
}

const numberFormats = new Map<string, Intl.NumberFormat>();

/** ``value`` as the active locale writes numbers (grouping, decimal mark). */
export function formatNumber(value: number, digits?: number): string {
  const key = `${current}/${digits ?? ""}`;
  let format = numberFormats.get(key);
  if (!format) {
    format = new Intl.NumberFormat(
      current,
      digits === undefined ? {} : { minimumFractionDigits: digits, maximumFractionDigits: digits },
    );
    numberFormats.set(key, format);
  }
  return format.format(value);
}
