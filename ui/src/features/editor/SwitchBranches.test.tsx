import { cleanup, fireEvent, render, screen, within } from "@testing-library/react";
import { useState } from "react";
import { afterEach, describe, expect, it } from "vitest";

import { SwitchBranches } from "./SwitchBranches";
import type { SwitchParams } from "./switchParams";

afterEach(cleanup);

function Harness({ error }: { error?: { field: string; message: string } }) {
  const [value, setValue] = useState<SwitchParams>({ cases: [{ condition: "", next: "" }] });
  return (
    <>
      <SwitchBranches value={value} candidates={["hot", "cold", "end"]} error={error} onChange={setValue} />
      <output data-testid="value">{JSON.stringify(value)}</output>
    </>
  );
}

const valueNow = () => JSON.parse(screen.getByTestId("value").textContent ?? "{}") as SwitchParams;

describe("SwitchBranches", () => {
  it("edits branches as condition + task rows and the default branch", () => {
    render(<Harness />);
    fireEvent.change(screen.getByLabelText("condition 1"), { target: { value: "${t} > 30" } });
    fireEvent.change(screen.getByLabelText("then run 1"), { target: { value: "hot" } });
    fireEvent.click(screen.getByRole("button", { name: "Add branch" }));
    fireEvent.change(screen.getByLabelText("condition 2"), { target: { value: "${t} < 0" } });
    fireEvent.change(screen.getByLabelText("then run 2"), { target: { value: "cold" } });
    fireEvent.change(screen.getByLabelText("default"), { target: { value: "end" } });
    expect(valueNow()).toEqual({
      cases: [
        { condition: "${t} > 30", next: "hot" },
        { condition: "${t} < 0", next: "cold" },
      ],
      default: "end",
    });
    fireEvent.click(screen.getByRole("button", { name: "Remove branch 1" }));
    fireEvent.change(screen.getByLabelText("default"), { target: { value: "" } });
    expect(valueNow()).toEqual({ cases: [{ condition: "${t} < 0", next: "cold" }] });
  });

  it("shows the server's refusal at the branch it names", () => {
    render(<Harness error={{ field: "cases[0].condition", message: "unknown operator" }} />);
    expect(within(screen.getByTestId("branch-0")).getByRole("alert").textContent).toBe("unknown operator");
    expect(screen.getByLabelText("condition 1").getAttribute("aria-invalid")).toBe("true");
  });
});
