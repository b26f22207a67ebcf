import type { ReactNode } from "react";

import { useMe } from "../api/queries";
import { ErrorBox, Loading } from "../components/ErrorBox";
import { lackingAdmin } from "../features/access/rights";
import { translation } from "../i18n";

const TEXT = { who: "your rights", title: "Admin" };
translation(TEXT, { who: "你的权限", title: "管理" });

/** The admin screens, for admins only (the tab is not shown to others; an address typed in says why). */
export function AdminOnly({ children }: { children: ReactNode }) {
  const me = useMe();
  if (me.isPending) return <Loading what={TEXT.who} />;
  const reason = me.data ? lackingAdmin(me.data) : null;
  if (!me.data) return <ErrorBox error={me.error} />;
  if (reason) return <ErrorBox error={new Error(reason)} title={TEXT.title} />;
  return <>{children}</>;
}
