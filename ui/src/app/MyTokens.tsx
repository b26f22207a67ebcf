import { Tokens } from "../features/admin/Tokens";
import { translation } from "../i18n";
import { tTitle } from "../components/strings";
import { useTitle } from "../components/title";

const TEXT = { title: "My API tokens" };
translation(TEXT, { title: "我的 API 令牌" });

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
