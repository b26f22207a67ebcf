import { cleanup, fireEvent, render, screen, waitFor } from "@testing-library/react";
import { useState } from "react";
import { afterEach, describe, expect, it } from "vitest";

import { CodeField, languageOf } from "./CodeField";

afterEach(cleanup);

function Harness() {
  const [text, setText] = useState("echo ${x}");
  return (
    <>
      <CodeField
        id="param-rawScript"
        label="rawScript"
        value={text}
        mediaType="text/x-shellscript"
        onChange={setText}
      />
      <output data-testid="text">{text}</output>
    </>
  );
}

describe("CodeField", () => {
  it("picks the language from the schema's media type", () => {
    expect(languageOf("text/x-shellscript")).toBe("shell");
    expect(languageOf("text/x-python")).toBe("python");
    expect(languageOf("text/x-sql")).toBe("sql");
    expect(languageOf(undefined)).toBe("text");
  });

  it("is a textarea until the editor's chunk arrives, then the highlighting editor with the Tab hint", async () => {
    render(<Harness />);
    const fallback = screen.getByLabelText("rawScript");
    expect(fallback.tagName).toBe("TEXTAREA");
    fireEvent.change(fallback, { target: { value: "echo 1" } });
    expect(screen.getByTestId("text").textContent).toBe("echo 1");
    await waitFor(() => expect(screen.getByTestId("code-param-rawScript").dataset.ready).toBe("true"), {
      timeout: 20_000, // the editor's chunk is transformed on first import: slow on a loaded machine
    });
    const content = document.querySelector(".cm-content");
    expect(content?.getAttribute("aria-label")).toBe("rawScript");
    expect(content?.textContent).toBe("echo 1");
    expect(screen.getByText("Esc then Tab leaves the editor")).toBeTruthy();
  }, 30_000);

  it("carries its validity to the element that takes the focus, also once mounted again with its error", async () => {
    const { rerender } = render(<CodeField id="c" label="sql" value="" onChange={() => undefined} />);
    await waitFor(() => expect(screen.getByTestId("code-c").dataset.ready).toBe("true"), { timeout: 20_000 });
    // a refusal shows the error: the description changes, the editor is mounted again, invalid
    rerender(
      <CodeField id="c" label="sql" value="" describedBy="c-error" invalid onChange={() => undefined} />,
    );
    await waitFor(() =>
      expect(screen.getByTestId("code-c").querySelector(".cm-content")?.getAttribute("aria-invalid")).toBe(
        "true",
      ),
    );
    rerender(<CodeField id="c" label="sql" value="x" describedBy="c-error" onChange={() => undefined} />);
    await waitFor(() =>
      expect(screen.getByTestId("code-c").querySelector(".cm-content")?.getAttribute("aria-invalid")).toBe(
        "false",
      ),
    );
  });
});
