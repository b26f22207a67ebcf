// What the signed-in caller may do, from GET /api/v1/me: an action the caller lacks the right for is shown
// disabled with the reason (the server's rule, docs/permissions), rather than answering 403 after a click.
import type { Me } from "../../api/client";
import { useMe } from "../../api/queries";
import { translation } from "../../i18n";

export type Right = "READ" | "EXECUTE" | "WRITE";

const TEXT = {
  checking: "checking your rights…",
  needs: (right: Right, project: string) => `needs ${right} on project ${project}`,
  tokenLacks: (right: Right) => `this token does not carry ${right}`,
  adminOnly: "only an admin may do this",
};
const RIGHT_NAMES: Record<Right, string> = { READ: "读", EXECUTE: "执行", WRITE: "写" };
translation(TEXT, {
  checking: "正在检查你的权限…",
  needs: (right, project) => `需要项目 ${project} 的${RIGHT_NAMES[right]}（${right}）权限`,
  tokenLacks: (right) => `此令牌不带${RIGHT_NAMES[right]}（${right}）权限`,
  adminOnly: "只有管理员可以执行此操作",
});

/** Null when ``me`` may use ``right`` on ``project`` (its name or code); else why not, to show beside the
 * disabled action. */
export function lacking(
  me: Me | undefined,
  project: string | number | undefined,
  right: Right,
): string | null {
  if (!me || project === undefined) return TEXT.checking;
  if (me.admin) return null;
  const found = me.projects.find((p) =>
    typeof project === "number" ? p.code === project : p.name === project,
  );
  if (found?.perms.includes(right)) return null;
  return TEXT.needs(right, found?.name ?? String(project));
}

/** Null when ``me`` may create a project (and so a workflow in a new one): any user, unless the token lacks
 * WRITE. */
export function lackingCreate(me: Me | undefined): string | null {
  if (!me) return TEXT.checking;
  if (me.token_perms && !me.token_perms.includes("WRITE")) return TEXT.tokenLacks("WRITE");
  return null;
}

export function lackingAdmin(me: Me | undefined): string | null {
  if (!me) return TEXT.checking;
  return me.admin ? null : TEXT.adminOnly;
}

/** The reason the caller may not use ``right`` on ``project``, or null. */
export function useLacking(project: string | number | undefined, right: Right): string | null {
  return lacking(useMe().data, project, right);
}

/** The name of a project the caller sees, from its code (instances carry only the code). */
export function projectName(me: Me | undefined, code: number | undefined): string | undefined {
  return me?.projects.find((p) => p.code === code)?.name;
}
