// The dictionaries of the languages besides English, loaded when their language is first wanted: the initial
// JavaScript carries English alone (the source strings), and Chinese comes as one chunk (./zh.ts) when the
// saved or browser language is Chinese at start (main.tsx waits for it before the first render) or when the
// header's switch picks it.
import { setLocale, type Locale } from "./index";

const loaders: Record<Exclude<Locale, "en">, () => Promise<unknown>> = {
  "zh-CN": () => import("./zh"),
};
const loading = new Map<Locale, Promise<void>>();
let wanted: Locale | null = null;

/** Load (once) the dictionary of ``language``; English is always there. */
export function loadLocale(language: Locale): Promise<void> {
  if (language === "en") return Promise.resolve();
  let done = loading.get(language);
  if (!done) {
    done = loaders[language]().then(() => undefined);
    loading.set(language, done);
    done.catch(() => loading.delete(language)); // a failed load is tried again on the next switch
  }
  return done;
}

/** Switch to ``language`` once its dictionary is loaded; of switches in quick succession the last one wins. */
export async function switchLocale(language: Locale): Promise<void> {
  wanted = language;
  await loadLocale(language);
  if (wanted === language) setLocale(language);
}
