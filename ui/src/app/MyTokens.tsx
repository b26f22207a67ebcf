import { Tokens } from "../features/admin/Tokens";
import { tTitle } from "../components/strings";
import { useTitle } from "../components/title";

const TEXT = { title: "My API tokens" };

/** A user who is not an admin manages their own API tokens here (admins: Admin → API tokens). */
export function MyTokens() {
  useTitle(tTitle.tokens);
  return (
    <section>
      <h1>{TEXT.title}</h1>
      <Tokens />
    </section>
  );
}
