// A modal dialog: a <dialog> shown with showModal() (the page behind is inert), aria-modal, focus moved to
// its first field on open and back to what had it on close, Escape closes it.
import { useEffect, useRef, type ReactNode } from "react";

const FOCUSABLE =
  "[autofocus], input:not([disabled]), select:not([disabled]), textarea, button:not([disabled])";

export function Modal({
  labelledBy,
  onClose,
  children,
  testId,
}: {
  /** the id of the element naming the dialog (its heading) */
  labelledBy: string;
  onClose: () => void;
  children: ReactNode;
  testId?: string;
}) {
  const ref = useRef<HTMLDialogElement>(null);
  const close = useRef(onClose);
  close.current = onClose;
  useEffect(() => {
    const dialog = ref.current;
    const opener = document.activeElement instanceof HTMLElement ? document.activeElement : null;
    if (dialog && !dialog.open) {
      if (typeof dialog.showModal === "function") dialog.showModal();
      else dialog.setAttribute("open", "");
    }
    dialog?.querySelector<HTMLElement>(FOCUSABLE)?.focus();
    return () => {
      if (dialog?.open) dialog.close();
      opener?.focus();
    };
  }, []);
  return (
    <dialog
      ref={ref}
      className="dialog modal"
      aria-modal="true"
      aria-labelledby={labelledBy}
      data-testid={testId}
      onCancel={(e) => {
        e.preventDefault();
        close.current();
      }}
      onKeyDown={(e) => {
        if (e.key !== "Escape") return;
        e.preventDefault();
        e.stopPropagation();
        close.current();
      }}
    >
      {children}
    </dialog>
  );
}
