import { useSyncExternalStore } from "react";

import { connection } from "../features/live/connection";

export function ConnectionBanner() {
  const lost = useSyncExternalStore(connection.subscribe, connection.lost);
  if (!lost) return null;
  return (
    <div className="banner" role="alert" data-testid="connection-lost">
      Connection to the server lost — retrying; what you see may be out of date.
    </div>
  );
}
