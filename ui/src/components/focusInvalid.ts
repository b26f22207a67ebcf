// After a refused save, focus moves to the first invalid field (aria-invalid="true"), in every form of the app
// at once: a form's submit, or a click on a save button outside a form (data-save: the editor's), arms a
// watch of that form (or the page); a field already invalid (a client-side check refused the save) or made
// invalid by the answer (the server's 400 at a field, shown when it arrives) takes the focus, and takes it
// again when re-rendered under it. Typing, a key or a pointer disarms it, so a field turning invalid as the
// user types never moves the focus.
const INVALID = '[aria-invalid="true"]';

/** Starts the watch on ``doc``; the function returned stops it. */
export function installFocusInvalid(doc: Document = document): () => void {
  let armed: HTMLElement | null = null;
  /** Focus the first invalid field, unless the focus is on one already; the watch stays armed until the user
   * acts (a field re-rendered under the focus, as the code editor's, takes it again). */
  const focusFirst = (): boolean => {
    const field = armed?.isConnected ? armed.querySelector<HTMLElement>(INVALID) : null;
    if (!field) return false;
    const active = doc.activeElement;
    if (active && active !== doc.body && active.isConnected && active.closest(INVALID)) return true;
    field.focus();
    return true;
  };
  const arm = (scope: HTMLElement) => {
    armed = scope;
    // a client-side check shows its errors in the render that follows the submit
    queueMicrotask(() => requestAnimationFrame(() => focusFirst()));
  };
  const onSubmit = (e: Event) => {
    if (e.target instanceof HTMLFormElement) arm(e.target);
  };
  const onClick = (e: Event) => {
    const button = e.target instanceof Element ? e.target.closest<HTMLElement>("[data-save]") : null;
    if (button) arm(button.closest("form") ?? doc.body);
  };
  const disarm = () => {
    armed = null;
  };
  const observer = new MutationObserver(() => {
    if (armed) focusFirst();
  });
  observer.observe(doc.body, {
    subtree: true,
    childList: true,
    attributes: true,
    attributeFilter: ["aria-invalid"],
  });
  doc.addEventListener("submit", onSubmit, true);
  doc.addEventListener("click", onClick, true);
  // the user acts: typing, a key, a pointer anywhere (a save's own click arms again after its pointerdown)
  const acts = ["input", "keydown", "pointerdown"] as const;
  for (const name of acts) doc.addEventListener(name, disarm, true);
  return () => {
    observer.disconnect();
    doc.removeEventListener("submit", onSubmit, true);
    doc.removeEventListener("click", onClick, true);
    for (const name of acts) doc.removeEventListener(name, disarm, true);
  };
}
