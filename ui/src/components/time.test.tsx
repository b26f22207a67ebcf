import { act, cleanup, fireEvent, render, screen } from "@testing-library/react";
import { afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";

import { ZoneSwitch } from "./ZoneSwitch";
import { Time } from "./Time";
import { loadLocale } from "../i18n/catalog";
import { setLocale } from "../i18n";
import {
  formatDuration,
  formatInZone,
  formatTime,
  offsetLabel,
  parseInZone,
  setDisplayZone,
  typedInZone,
  ZONE_KEY,
} from "./time";

// the Chinese dictionaries, loaded as the header's switch loads them
beforeAll(() => loadLocale("zh-CN"));

beforeEach(() => act(() => setDisplayZone("UTC")));

afterEach(() => {
  cleanup();
  act(() => setDisplayZone("UTC"));
  localStorage.clear();
});

describe("formatTime", () => {
  it("says the zone of every time it shows", () => {
    expect(formatTime("2026-11-27T18:00:00Z", "UTC")).toMatch(/18:00:00 UTC$/);
    expect(formatTime("2026-11-27T18:00:00Z", "Asia/Shanghai")).toMatch(/02:00:00 UTC\+8$/);
    expect(formatTime("2026-11-27T18:00:00Z", "Asia/Kolkata")).toMatch(/23:30:00 UTC\+5:30$/);
    expect(formatTime("2026-07-01T12:00:00Z", "America/New_York")).toMatch(/08:00:00 UTC−4$/);
    expect(formatTime(null, "UTC")).toBe("—");
  });

  it("writes dates as the active language does, always 24-hour and in the zone", () => {
    act(() => setLocale("zh-CN"));
    expect(formatTime("2026-03-05T00:00:00Z", "Asia/Shanghai")).toBe("2026/3/5 08:00:00 UTC+8");
    expect(formatDuration(1500)).toBe("1.5 秒");
    act(() => setLocale("en"));
    expect(formatTime("2026-03-05T00:00:00Z", "Asia/Shanghai")).toBe("3/5/2026, 08:00:00 UTC+8");
    expect(formatDuration(1500)).toBe("1.5 s");
  });

  it("names a schedule's own zone", () => {
    expect(formatInZone("2026-11-27T18:00:00Z", "Asia/Shanghai")).toMatch(/02:00:00 Asia\/Shanghai$/);
  });

  it("labels the offset at the instant (summer time)", () => {
    expect(offsetLabel(new Date("2026-01-15T12:00:00Z"), "Europe/Berlin")).toBe("UTC+1");
    expect(offsetLabel(new Date("2026-07-15T12:00:00Z"), "Europe/Berlin")).toBe("UTC+2");
  });
});

describe("the display-zone switch", () => {
  it("re-renders every time in the chosen zone and keeps the choice", () => {
    render(
      <>
        <ZoneSwitch />
        <span data-testid="t">
          <Time iso="2026-11-27T18:00:00Z" />
        </span>
      </>,
    );
    expect(screen.getByTestId("t").textContent).toMatch(/18:00:00 UTC$/);
    fireEvent.change(screen.getByLabelText("Display time zone"), { target: { value: "other" } });
    const zone = screen.getByLabelText("IANA time zone");
    fireEvent.change(zone, { target: { value: "Asia/Shanghai" } });
    fireEvent.keyDown(zone, { key: "Enter" });
    expect(screen.getByTestId("t").textContent).toMatch(/02:00:00 UTC\+8$/);
    expect(localStorage.getItem(ZONE_KEY)).toBe("Asia/Shanghai");
  });

  it("refuses a zone that does not exist, at the field", () => {
    render(<ZoneSwitch />);
    fireEvent.change(screen.getByLabelText("Display time zone"), { target: { value: "other" } });
    const zone = screen.getByLabelText("IANA time zone");
    fireEvent.change(zone, { target: { value: "Mars/Olympus" } });
    fireEvent.keyDown(zone, { key: "Enter" });
    expect(screen.getByRole("alert").textContent).toContain("Mars/Olympus");
    expect(localStorage.getItem(ZONE_KEY)).toBe("UTC");
  });
});

describe("typed times", () => {
  it("reads a wall clock in the display zone, summer time included", () => {
    expect(parseInZone("2026-03-01 08:00", "Asia/Shanghai")).toBe("2026-03-01T00:00:00Z");
    expect(parseInZone("2026-03-01", "UTC")).toBe("2026-03-01T00:00:00Z");
    expect(parseInZone("2026-07-01 02:00:30", "Europe/Berlin")).toBe("2026-07-01T00:00:30Z");
    expect(parseInZone("2026-01-01 02:00", "Europe/Berlin")).toBe("2026-01-01T01:00:00Z");
  });

  it("refuses what is not a time", () => {
    for (const bad of ["NaN", "2026-13-01", "2026-02-30", "2026-03-01 24:00", "yesterday", ""])
      expect(parseInZone(bad, "UTC")).toBeNull();
  });

  it("writes back what it reads", () => {
    expect(typedInZone("2026-03-01T00:00:00Z", "Asia/Shanghai")).toBe("2026-03-01 08:00");
    expect(parseInZone(typedInZone("2026-07-01T00:00:30Z", "Europe/Berlin"), "Europe/Berlin")).toBe(
      "2026-07-01T00:00:30Z",
    );
  });
});
