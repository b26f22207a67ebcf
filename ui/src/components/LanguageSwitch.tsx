// The header's language switch: English or Simplified Chinese, kept in localStorage (the first visit follows
// the browser's language); every string, date and number follows it without a reload, once the picked
// language's dictionary has loaded (i18n/catalog.ts).
import { LOCALES, useLocale, type Locale } from "../i18n";
import { switchLocale } from "../i18n/catalog";
import { tLanguage } from "./strings";

/** Each language named in itself: what a reader of it looks for. */
const NAMES: Record<Locale, string> = { en: "English", "zh-CN": "中文" };

export function LanguageSwitch() {
  const active = useLocale();
  return (
    <select
      className="language-switch"
      aria-label={tLanguage.label}
      title={tLanguage.title}
      value={active}
      onChange={(e) => void switchLocale(e.target.value as Locale)}
    >
      {LOCALES.map((code) => (
        <option key={code} value={code} lang={code}>
          {NAMES[code]}
        </option>
      ))}
    </select>
  );
}
