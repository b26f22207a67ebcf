import { act, render, screen } from "@testing-library/react";
import { describe, expect, it } from "vitest";

import { connection } from "../features/live/connection";
import { ConnectionBanner } from "./ConnectionBanner";

describe("ConnectionBanner", () => {
  it("shows while the stream or the last request is down, and goes when both recover", () => {
    render(<ConnectionBanner />);
    expect(screen.queryByTestId("connection-lost")).toBeNull();
    act(() => connection.reportStream(false));
    expect(screen.getByRole("alert").textContent).toMatch(/Connection to the server lost/);
    act(() => connection.report(false));
    act(() => connection.reportStream(true));
    expect(screen.queryByTestId("connection-lost")).not.toBeNull(); // a request still fails
    act(() => connection.report(true));
    expect(screen.queryByTestId("connection-lost")).toBeNull();
  });
});
