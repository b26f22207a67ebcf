import { cleanup, fireEvent, render, screen, waitFor } from "@testing-library/react";
import { afterEach, describe, expect, it } from "vitest";

import { locale, translations } from "../i18n";
import { switchLocale } from "../i18n/catalog";
import { LanguageSwitch } from "./LanguageSwitch";

afterEach(async () => {
  await switchLocale("en");
  cleanup();
});

describe("the language switch", () => {
  it("loads the Chinese dictionaries only when Chinese is picked, and switches back", async () => {
    expect(locale()).toBe("en");
    expect(translations()).toHaveLength(0); // English alone until Chinese is wanted
    render(<LanguageSwitch />);
    fireEvent.change(screen.getByLabelText("Language"), { target: { value: "zh-CN" } });
    expect(await screen.findByLabelText("语言")).toBeTruthy();
    expect(locale()).toBe("zh-CN");
    expect(translations().length).toBeGreaterThan(20);
    fireEvent.change(screen.getByLabelText("语言"), { target: { value: "en" } });
    await waitFor(() => expect(screen.getByLabelText("Language")).toBeTruthy());
  });

  it("keeps the last of two quick switches", async () => {
    const chinese = switchLocale("zh-CN");
    const english = switchLocale("en");
    await Promise.all([chinese, english]);
    expect(locale()).toBe("en");
  });
});
