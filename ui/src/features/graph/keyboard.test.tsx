import { cleanup, fireEvent, render, screen } from "@testing-library/react";
import { afterEach, describe, expect, it, vi } from "vitest";

import { syncNodes } from "../editor/elements";
import { nodeLabel, selectOnKey } from "./keyboard";

afterEach(cleanup);

describe("a DAG node by keyboard", () => {
  it("is named by its task, type and state", () => {
    expect(nodeLabel({ name: "load", type: "SQL", state: "RUNNING_EXECUTION" })).toBe("load, SQL, running");
    expect(nodeLabel({ name: "c", type: "PYTHON", error: "rawScript is empty" })).toBe(
      "c, PYTHON, error: rawScript is empty",
    );
  });

  it("is named so in the editor", () => {
    const [node] = syncNodes([], [{ name: "b", type: "SHELL" } as never], () => ({ x: 0, y: 0 }), new Map());
    expect(node?.ariaLabel).toBe("b, SHELL");
  });

  it("is selected with Enter or Space when focused, not from a button inside it", () => {
    const select = vi.fn();
    render(
      <div onKeyDown={selectOnKey(select)}>
        <div className="react-flow__node" data-id="a" tabIndex={0} role="button" aria-label="Task a, SHELL">
          <button>expand</button>
        </div>
      </div>,
    );
    const node = screen.getByRole("button", { name: "Task a, SHELL" });
    fireEvent.keyDown(node, { key: "Enter" });
    fireEvent.keyDown(node, { key: " " });
    fireEvent.keyDown(node, { key: "a" });
    fireEvent.keyDown(screen.getByRole("button", { name: "expand" }), { key: "Enter" });
    expect(select.mock.calls).toEqual([["a"], ["a"]]);
  });
});
