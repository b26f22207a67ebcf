// A task's local parameters as rows (prop / direction / type / value), as DolphinScheduler's task form has
// them: add and remove rows, each row's problem shown at it before the save, the server's refusal at the row
// it names.
import { useMemo } from "react";

import { DIRECTIONS, PARAM_TYPES, rowOfRefusal, rowProblems, type ParamRow } from "./localParams";
import { tEditor } from "./strings";

export function LocalParams({
  rows,
  refusal,
  onChange,
}: {
  rows: readonly ParamRow[];
  /** the server's message about ``localParams`` */
  refusal?: string;
  onChange: (rows: ParamRow[]) => void;
}) {
  const problems = useMemo(() => {
    const found = rowProblems(rows);
    if (refusal) {
      const at = rowOfRefusal(rows, refusal);
      if (at >= 0 && !found.has(at)) found.set(at, refusal);
    }
    return found;
  }, [rows, refusal]);
  const unplaced = refusal && rowOfRefusal(rows, refusal) < 0 ? refusal : undefined;
  const set = (i: number, patch: Partial<ParamRow>) =>
    onChange(rows.map((r, j) => (j === i ? { ...r, ...patch } : r)));

  return (
    <fieldset className="local-params" data-testid="local-params">
      <legend>{tEditor.localParams}</legend>
      {unplaced && (
        <div className="error-inline" role="alert">
          {unplaced}
        </div>
      )}
      {rows.length === 0 ? (
        <div className="muted small">{tEditor.localParamsNone}</div>
      ) : (
        <table className="param-rows">
          <thead>
            <tr>
              <th scope="col">{tEditor.paramProp}</th>
              <th scope="col">{tEditor.paramDirect}</th>
              <th scope="col">{tEditor.paramType}</th>
              <th scope="col">{tEditor.paramValue}</th>
              <th scope="col" />
            </tr>
          </thead>
          <tbody>
            {rows.map((row, i) => {
              const problem = problems.get(i);
              const errorId = `lp-${i}-error`;
              const described = problem ? { "aria-invalid": true, "aria-describedby": errorId } : {};
              return (
                // rows have no identity but their place: a removed row shifts the ones below
                <tr key={i} className={problem ? "invalid" : undefined} data-testid={`param-row-${i}`}>
                  <td>
                    <input
                      aria-label={`${tEditor.paramProp} ${i + 1}`}
                      value={row.prop}
                      onChange={(e) => set(i, { prop: e.target.value })}
                      {...described}
                    />
                    {problem && (
                      <div className="error-inline" id={errorId} role="alert">
                        {problem}
                      </div>
                    )}
                  </td>
                  <td>
                    <select
                      aria-label={`${tEditor.paramDirect} ${i + 1}`}
                      value={row.direct}
                      onChange={(e) => set(i, { direct: e.target.value as ParamRow["direct"] })}
                    >
                      {DIRECTIONS.map((d) => (
                        <option key={d}>{d}</option>
                      ))}
                    </select>
                  </td>
                  <td>
                    <select
                      aria-label={`${tEditor.paramType} ${i + 1}`}
                      value={row.type}
                      onChange={(e) => set(i, { type: e.target.value })}
                    >
                      {!(PARAM_TYPES as readonly string[]).includes(row.type) && <option>{row.type}</option>}
                      {PARAM_TYPES.map((t) => (
                        <option key={t}>{t}</option>
                      ))}
                    </select>
                  </td>
                  <td>
                    <input
                      aria-label={`${tEditor.paramValue} ${i + 1}`}
                      value={row.value}
                      onChange={(e) => set(i, { value: e.target.value })}
                      {...described}
                    />
                  </td>
                  <td>
                    <button
                      className="link"
                      aria-label={tEditor.removeParam(row.prop)}
                      onClick={() => onChange(rows.filter((_, j) => j !== i))}
                    >
                      ✕
                    </button>
                  </td>
                </tr>
              );
            })}
          </tbody>
        </table>
      )}
      <button onClick={() => onChange([...rows, { prop: "", direct: "IN", type: "VARCHAR", value: "" }])}>
        {tEditor.addParam}
      </button>
    </fieldset>
  );
}
