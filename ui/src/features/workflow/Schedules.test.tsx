import { QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { act, cleanup, fireEvent, render, screen, within } from "@testing-library/react";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";

import { setDisplayZone } from "../../components/time";
import { Schedules } from "./Schedules";

/** A fake API answering as engine/api/schedules.py does. */
vi.hoisted(() => {
  const json = (body: unknown) =>
    new Response(JSON.stringify(body), { status: 200, headers: { "Content-Type": "application/json" } });
  globalThis.fetch = (async (input: RequestInfo | URL, init?: RequestInit) => {
    const request = input instanceof Request ? input : new Request(input, init);
    const url = new URL(request.url);
    if (url.pathname === "/api/v1/schedules")
      return json({
        page: 1,
        size: 100,
        total: 1,
        items: [
          {
            id: 3,
            workflow_code: 9,
            crontab: "0 2 * * *",
            timezone: "Asia/Shanghai",
            release_state: "ONLINE",
            next_fire_times: ["2026-11-27T18:00:00Z"],
          },
        ],
      });
    if (url.pathname === "/api/v1/schedules/preview")
      return json({
        crontab: "0 2 * * *",
        timezone: "Asia/Shanghai",
        next_fire_times: ["2026-11-27T18:00:00Z", "2026-11-28T18:00:00Z"],
      });
    return new Response("{}", { status: 404 });
  }) as typeof fetch;
});

beforeEach(() => act(() => setDisplayZone("UTC")));
afterEach(cleanup);

function show() {
  const client = new QueryClient({ defaultOptions: { queries: { retry: false } } });
  render(
    <QueryClientProvider client={client}>
      <Schedules code={9} lacking={null} />
    </QueryClientProvider>,
  );
}

describe("schedule times", () => {
  it("lists the next fire in the schedule's zone and in the viewer's, each labelled", async () => {
    show();
    const next = await screen.findByTestId("next-fire-3");
    expect(next.textContent).toContain("02:00:00 Asia/Shanghai");
    expect(next.textContent).toContain("18:00:00 UTC");
  });

  it("previews the next fire times in both zones as you type", async () => {
    show();
    fireEvent.click(await screen.findByRole("button", { name: "Edit" }));
    const preview = screen.getByTestId("next-fires");
    await within(preview).findAllByText(/02:00:00 Asia\/Shanghai/);
    expect(within(preview).getByRole("columnheader", { name: /schedule's zone/ })).toBeTruthy();
    expect(within(preview).getByRole("columnheader", { name: /your display zone/ })).toBeTruthy();
    expect(within(preview).getAllByText(/18:00:00 UTC$/)).toHaveLength(2);
    act(() => setDisplayZone("Europe/Berlin"));
    expect(within(preview).getAllByText(/19:00:00 UTC\+1$/)).toHaveLength(2);
  });
});
