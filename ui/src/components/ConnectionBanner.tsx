import { useSyncExternalStore } from "react";

import { connection } from "../features/live/connection";
import { tCommon } from "./strings";

export function ConnectionBanner() {
  const lost = useSyncExternalStore(connection.subscribe, connection.lost);
  if (!lost) return null;
  return (
    <div className="banner" role="alert" data-testid="connection-lost">
      {tCommon.connectionLost}
    </div>
  );
}
