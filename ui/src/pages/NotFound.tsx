import { isRouteErrorResponse, Link, useRouteError } from "react-router";
import { tTitle } from "../components/strings";
import { useTitle } from "../components/title";

export function NotFound() {
  useTitle(tTitle.notFound);
  const error = useRouteError();
  const message = error
    ? isRouteErrorResponse(error)
      ? `${error.status} ${error.statusText}`
      : error instanceof Error
        ? error.message
        : String(error)
    : "There is no page at this address.";
  return (
    <section className="content">
      <h1>Nothing here</h1>
      <p role="alert">{message}</p>
      <Link to="/instances">Go to the instances</Link>
    </section>
  );
}
