import { isRouteErrorResponse, Link, useRouteError } from "react-router";
import { tTitle } from "../components/strings";
import { useTitle } from "../components/title";

import { tCommon } from "../components/strings";
import { tNotFound } from "./strings";

export function NotFound() {
  useTitle(tTitle.notFound);
  const error = useRouteError();
  const message = error
    ? isRouteErrorResponse(error)
      ? `${error.status} ${error.statusText}`
      : error instanceof Error
        ? error.message
        : String(error)
    : tNotFound.noPage;
  return (
    <section className="content">
      <h1>{tCommon.nothingHere}</h1>
      <p role="alert">{message}</p>
      <Link to="/instances">{tCommon.toInstances}</Link>
    </section>
  );
}
