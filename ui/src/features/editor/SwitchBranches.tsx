// A SWITCH task's branches as DolphinScheduler's form has them: rows of a condition and the task it runs,
// then the default branch. Picking a task links it below the SWITCH (a branch must be a downstream task).
import { tEditor } from "./strings";
import type { SwitchParams } from "./switchParams";

/** ``cases[1].next`` -> [1, "next"]; ``default`` -> [-1, "default"]. */
function placeOf(field: string): [number, string] | null {
  const m = /^cases\[(\d+)\]\.(condition|next)$/.exec(field);
  if (m) return [Number(m[1]), m[2] ?? ""];
  return field === "default" ? [-1, "default"] : null;
}

export function SwitchBranches({
  value,
  candidates,
  error,
  onChange,
}: {
  value: SwitchParams;
  /** the tasks a branch may run (the workflow's other tasks) */
  candidates: readonly string[];
  /** the server's refusal inside the params: ``cases[0].condition``, ``default``, ``cases`` */
  error?: { field: string; message: string } | null;
  onChange: (next: SwitchParams) => void;
}) {
  const at = error ? placeOf(error.field) : null;
  const errorAt = (row: number, part: string) =>
    at && at[0] === row && at[1] === part ? error?.message : undefined;
  const setCase = (i: number, patch: Partial<SwitchParams["cases"][number]>) =>
    onChange({ ...value, cases: value.cases.map((c, j) => (j === i ? { ...c, ...patch } : c)) });
  const picker = (id: string, label: string, current: string | undefined, set: (v: string) => void) => (
    <select id={id} aria-label={label} value={current ?? ""} onChange={(e) => set(e.target.value)}>
      <option value="">{tEditor.branchNone}</option>
      {current && !candidates.includes(current) && <option>{current}</option>}
      {candidates.map((c) => (
        <option key={c}>{c}</option>
      ))}
    </select>
  );

  return (
    <fieldset className="switch-branches" data-testid="switch-branches">
      <legend>{tEditor.branches}</legend>
      {error && !at && (
        <div className="error-inline" role="alert">
          {error.message}
        </div>
      )}
      <ol className="branch-rows">
        {value.cases.map((c, i) => {
          const bad = errorAt(i, "condition") ?? errorAt(i, "next");
          return (
            // rows have no identity but their place
            <li key={i} className={bad ? "invalid" : undefined} data-testid={`branch-${i}`}>
              <input
                aria-label={`${tEditor.branchCondition} ${i + 1}`}
                placeholder={tEditor.branchCondition}
                spellCheck={false}
                value={c.condition}
                aria-invalid={Boolean(errorAt(i, "condition"))}
                onChange={(e) => setCase(i, { condition: e.target.value })}
              />
              <span className="muted small">{tEditor.branchNext}</span>
              {picker(`branch-next-${i}`, `${tEditor.branchNext} ${i + 1}`, c.next, (v) =>
                setCase(i, { next: v }),
              )}
              <button
                className="link"
                aria-label={tEditor.removeBranch(i + 1)}
                onClick={() => onChange({ ...value, cases: value.cases.filter((_, j) => j !== i) })}
              >
                ✕
              </button>
              {bad && (
                <div className="error-inline" role="alert">
                  {bad}
                </div>
              )}
            </li>
          );
        })}
      </ol>
      <button onClick={() => onChange({ ...value, cases: [...value.cases, { condition: "", next: "" }] })}>
        {tEditor.addBranch}
      </button>
      <div className={`form-field${errorAt(-1, "default") ? " invalid" : ""}`}>
        <label htmlFor="branch-default">{tEditor.branchDefault}</label>
        {picker("branch-default", tEditor.branchDefault, value.default, (v) =>
          onChange({ ...value, default: v || undefined }),
        )}
        {errorAt(-1, "default") ? (
          <div className="error-inline" role="alert">
            {errorAt(-1, "default")}
          </div>
        ) : (
          <div className="muted small">{tEditor.branchDefaultHelp}</div>
        )}
      </div>
      <div className="muted small">{tEditor.branchHint}</div>
    </fieldset>
  );
}
