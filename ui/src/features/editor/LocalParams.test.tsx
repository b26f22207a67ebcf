import { cleanup, fireEvent, render, screen, within } from "@testing-library/react";
import { useState } from "react";
import { afterEach, describe, expect, it } from "vitest";

import { LocalParams } from "./LocalParams";
import type { ParamRow } from "./localParams";

afterEach(cleanup);

function Harness({ initial, refusal }: { initial: ParamRow[]; refusal?: string }) {
  const [rows, setRows] = useState(initial);
  return (
    <>
      <LocalParams rows={rows} refusal={refusal} onChange={setRows} />
      <output data-testid="rows">{JSON.stringify(rows)}</output>
    </>
  );
}

const rowsNow = () => JSON.parse(screen.getByTestId("rows").textContent ?? "[]") as ParamRow[];

describe("LocalParams", () => {
  it("adds, edits and removes rows", () => {
    render(<Harness initial={[]} />);
    fireEvent.click(screen.getByRole("button", { name: "Add parameter" }));
    fireEvent.change(screen.getByLabelText("prop 1"), { target: { value: "n" } });
    fireEvent.change(screen.getByLabelText("type 1"), { target: { value: "INTEGER" } });
    fireEvent.change(screen.getByLabelText("direction 1"), { target: { value: "OUT" } });
    expect(rowsNow()).toEqual([{ prop: "n", direct: "OUT", type: "INTEGER", value: "" }]);
    fireEvent.click(screen.getByRole("button", { name: "Remove parameter n" }));
    expect(rowsNow()).toEqual([]);
  });

  it("shows a duplicate name and a bad value at their rows", () => {
    render(<Harness initial={[{ prop: "a", direct: "IN", type: "VARCHAR", value: "" }]} />);
    fireEvent.click(screen.getByRole("button", { name: "Add parameter" }));
    fireEvent.change(screen.getByLabelText("prop 2"), { target: { value: "a" } });
    expect(within(screen.getByTestId("param-row-1")).getByRole("alert").textContent).toMatch(
      /declared twice/,
    );
    expect(screen.getByLabelText("prop 2").getAttribute("aria-invalid")).toBe("true");
    fireEvent.change(screen.getByLabelText("prop 2"), { target: { value: "b" } });
    fireEvent.change(screen.getByLabelText("type 2"), { target: { value: "DATE" } });
    fireEvent.change(screen.getByLabelText("value 2"), { target: { value: "tomorrow" } });
    expect(within(screen.getByTestId("param-row-1")).getByRole("alert").textContent).toMatch(/yyyy-MM-dd/);
    expect(within(screen.getByTestId("param-row-0")).queryByRole("alert")).toBeNull();
  });

  it("shows the server's refusal at the row it names", () => {
    render(
      <Harness
        initial={[
          { prop: "a", direct: "IN", type: "VARCHAR", value: "" },
          { prop: "b", direct: "IN", type: "VARCHAR", value: "" },
        ]}
        refusal="parameter 'b': system.* names are built-in"
      />,
    );
    expect(within(screen.getByTestId("param-row-1")).getByRole("alert").textContent).toMatch(/built-in/);
    expect(within(screen.getByTestId("param-row-0")).queryByRole("alert")).toBeNull();
  });
});
