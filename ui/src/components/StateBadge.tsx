import { labelOf, symbolOf, toneOf } from "./state";

export function StateBadge({ state }: { state: string }) {
  return (
    <span className={`state state-${toneOf(state)}`} data-state={state} title={state}>
      <span aria-hidden="true">{symbolOf(state)}</span> {labelOf(state)}
    </span>
  );
}
