import { Link } from "react-router";

import { tTitle } from "./strings";
import { useTitle } from "./title";

const TEXT = {
  title: "Nothing here",
  notId: (what: string, value: string) =>
    `“${value}” is not a ${what} number: its address holds its id or code.`,
  back: "Go to the instances",
};

/** The number in an address (/workflows/123), or null when it is not one (never NaN sent to the API). */
export function idParam(value: string | undefined): number | null {
  return value !== undefined && /^\d{1,18}$/.test(value) ? Number(value) : null;
}

/** What an address with something else than a number where the id belongs shows. */
export function BadAddress({ what, value }: { what: string; value: string | undefined }) {
  useTitle(tTitle.notFound);
  return (
    <section>
      <h1>{TEXT.title}</h1>
      <p role="alert">{TEXT.notId(what, value ?? "")}</p>
      <Link to="/instances">{TEXT.back}</Link>
    </section>
  );
}
