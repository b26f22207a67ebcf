import { QueryClientProvider } from "@tanstack/react-query";
import { StrictMode } from "react";
import { createRoot } from "react-dom/client";
import { RouterProvider } from "react-router";

import { setUnauthorizedHandler } from "./api/client";
import { queryClient } from "./app/queryClient";
import { router } from "./app/router";
import { signOut } from "./app/session";
import { locale, useLocale } from "./i18n";
import { loadLocale } from "./i18n/catalog";
import "./styles.css";

setUnauthorizedHandler(() => void signOut());

/** The routed app, mounted again when the language changes: every component renders its strings afresh
 * (memoised ones too), the query cache above keeps the server's data. */
function App() {
  const language = useLocale();
  return <RouterProvider key={language} router={router} />;
}

// the first render waits for the saved language's dictionary (English needs none; a failed load shows English)
void loadLocale(locale())
  .catch(() => undefined)
  .then(() =>
    createRoot(document.getElementById("root") as HTMLElement).render(
      <StrictMode>
        <QueryClientProvider client={queryClient}>
          <App />
        </QueryClientProvider>
      </StrictMode>,
    ),
  );
