import { QueryClient } from "@tanstack/react-query";

import { ApiError } from "../api/client";

/** The app's one query cache: main.tsx provides it to the components, and the routes' loaders fill it before
 * their page renders (router.tsx). */
export const queryClient = new QueryClient({
  defaultOptions: {
    queries: {
      staleTime: 5_000,
      // the live stream refreshes what changes; errors from the server are shown, not retried blindly
      refetchOnWindowFocus: false,
      retry: (count, error) =>
        !(error instanceof ApiError && error.status >= 400 && error.status < 500) && count < 3,
    },
  },
});
