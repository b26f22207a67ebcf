import { Link } from "react-router";

import { tCommon } from "./strings";
import { tTitle } from "./strings";
import { useTitle } from "./title";

/** The number in an address (/workflows/123), or null when it is not one (never NaN sent to the API). */
export function idParam(value: string | undefined): number | null {
  return value !== undefined && /^\d{1,18}$/.test(value) ? Number(value) : null;
}

/** What an address with something else than a number where the id belongs shows. */
export function BadAddress({ what, value }: { what: string; value: string | undefined }) {
  useTitle(tTitle.notFound);
  return (
    <section>
      <h1>{tCommon.nothingHere}</h1>
      <p role="alert">{tCommon.notId(what, value ?? "")}</p>
      <Link to="/instances">{tCommon.toInstances}</Link>
    </section>
  );
}
