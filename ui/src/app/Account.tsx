// The header's account corner: who is signed in, and their own password changed in a modal dialog (every
// user may; the server wants the current password and then ends the browser sessions, so it signs in again).
import { useEffect, useRef, useState, type FormEvent } from "react";

import { useChangePassword, useMe } from "../api/queries";
import { ErrorBox } from "../components/ErrorBox";
import { translation } from "../i18n";
import { signOut } from "./session";

const TEXT = {
  signedInAs: "Signed in as",
  admin: "admin",
  change: "Change password",
  title: "Change your password",
  current: "Current password",
  next: "New password",
  repeat: "New password again",
  mismatch: "the two new passwords differ",
  save: "Change",
  cancel: "Cancel",
  refused: "Not changed",
  done: "Password changed: sign in again with the new one.",
  signOut: "Sign out",
};
translation(TEXT, {
  signedInAs: "当前用户",
  admin: "管理员",
  change: "修改密码",
  title: "修改你的密码",
  current: "当前密码",
  next: "新密码",
  repeat: "再次输入新密码",
  mismatch: "两次输入的新密码不一致",
  save: "修改",
  cancel: "取消",
  refused: "未修改",
  done: "密码已修改：请用新密码重新登录。",
  signOut: "退出登录",
});

export function Account() {
  const me = useMe().data;
  const [open, setOpen] = useState(false);
  return (
    <div className="account">
      {me && (
        <span data-testid="signed-in-as">
          {TEXT.signedInAs} <strong>{me.name}</strong>
          {me.admin ? ` (${TEXT.admin})` : ""}
        </span>
      )}
      <button className="link" onClick={() => setOpen(true)}>
        {TEXT.change}
      </button>
      <button className="link" onClick={() => void signOut()}>
        {TEXT.signOut}
      </button>
      {open && <PasswordDialog onClose={() => setOpen(false)} />}
    </div>
  );
}

function PasswordDialog({ onClose }: { onClose: () => void }) {
  const ref = useRef<HTMLDialogElement>(null);
  const [current, setCurrent] = useState("");
  const [next, setNext] = useState("");
  const [repeat, setRepeat] = useState("");
  const [error, setError] = useState<unknown>(null);
  const [done, setDone] = useState(false);
  const [busy, setBusy] = useState(false);
  const changing = useChangePassword();
  useEffect(() => {
    const dialog = ref.current;
    if (dialog && !dialog.open) dialog.showModal();
    return () => dialog?.close();
  }, []);

  const submit = async (event: FormEvent) => {
    event.preventDefault();
    setError(null);
    if (next !== repeat) {
      setError(new Error(TEXT.mismatch));
      return;
    }
    setBusy(true);
    try {
      await changing.mutateAsync({ old_password: current, new_password: next });
      setDone(true);
    } catch (exc) {
      setError(exc);
    } finally {
      setBusy(false);
    }
  };

  return (
    <dialog ref={ref} className="dialog modal" aria-labelledby="password-title" onCancel={onClose}>
      <h2 id="password-title">{TEXT.title}</h2>
      {done ? (
        <>
          <p role="status">{TEXT.done}</p>
          <button autoFocus onClick={() => void signOut()}>
            {TEXT.signOut}
          </button>
        </>
      ) : (
        <form onSubmit={submit} className="dialog-form">
          <label>
            {TEXT.current}
            <input
              type="password"
              autoComplete="current-password"
              autoFocus
              value={current}
              onChange={(e) => setCurrent(e.target.value)}
            />
          </label>
          <label>
            {TEXT.next}
            <input
              type="password"
              autoComplete="new-password"
              value={next}
              onChange={(e) => setNext(e.target.value)}
            />
          </label>
          <label>
            {TEXT.repeat}
            <input
              type="password"
              autoComplete="new-password"
              value={repeat}
              onChange={(e) => setRepeat(e.target.value)}
            />
          </label>
          <ErrorBox error={error} title={TEXT.refused} />
          <div className="actions">
            <button type="submit" disabled={busy || !current || !next}>
              {TEXT.save}
            </button>
            <button type="button" onClick={onClose}>
              {TEXT.cancel}
            </button>
          </div>
        </form>
      )}
    </dialog>
  );
}
