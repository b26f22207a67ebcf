// The page's title (document.title): the screen, the object it shows when known, then the app's name, so a
// browser tab, the history and a screen reader's announcement of the page say which one it is.
import { useEffect } from "react";

import { tTitle } from "./strings";

/** "screen · object · Porpoise": empty parts (an object not loaded yet) are left out. */
export function pageTitle(...parts: (string | null | undefined)[]): string {
  return [...parts.filter((p): p is string => !!p), tTitle.app].join(tTitle.separator);
}

/** Sets the page's title while the component is shown. */
export function useTitle(...parts: (string | null | undefined)[]): void {
  const title = pageTitle(...parts);
  useEffect(() => {
    document.title = title;
  }, [title]);
}
