import { describe, expect, it } from "vitest";

import { ApiError } from "./client";
import { uploadFile } from "./upload";

/** A stand-in for XMLHttpRequest: records the request, reports progress, answers ``status`` / ``body``. */
class FakeXhr {
  method = "";
  url = "";
  headers: Record<string, string> = {};
  withCredentials = false;
  status = 0;
  responseText = "";
  upload: { onprogress: ((e: { loaded: number; total: number; lengthComputable: boolean }) => void) | null } =
    {
      onprogress: null,
    };
  onload: (() => void) | null = null;
  onerror: (() => void) | null = null;
  sent: unknown = null;
  constructor(private answer: { status: number; body: unknown }) {}
  open(method: string, url: string) {
    this.method = method;
    this.url = url;
  }
  setRequestHeader(name: string, value: string) {
    this.headers[name] = value;
  }
  send(body: unknown) {
    this.sent = body;
    this.upload.onprogress?.({ loaded: 2, total: 4, lengthComputable: true });
    this.status = this.answer.status;
    this.responseText = JSON.stringify(this.answer.body);
    this.onload?.();
  }
}

describe("uploadFile", () => {
  it("streams the file as the raw body to the path, reporting progress, and answers the stored version", async () => {
    let xhr: FakeXhr | undefined;
    const seen: [number, number][] = [];
    const file = new Blob(["abcd"]);
    const stored = await uploadFile(
      "etl",
      "jobs/a b.sh",
      file,
      " first ",
      (l, t) => seen.push([l, t]),
      () => {
        xhr = new FakeXhr({ status: 201, body: { path: "jobs/a b.sh", version: 3 } });
        return xhr as unknown as XMLHttpRequest;
      },
    );
    expect(stored).toEqual({ path: "jobs/a b.sh", version: 3 });
    expect(xhr?.method).toBe("POST");
    expect(xhr?.url).toMatch(/\/api\/v1\/projects\/etl\/resources\?path=jobs%2Fa\+b\.sh&description=first$/);
    expect(xhr?.headers["Content-Type"]).toBe("application/octet-stream");
    expect(xhr?.sent).toBe(file);
    expect(seen).toEqual([
      [2, 4],
      [4, 4],
    ]);
  });

  it("answers the server's refusal as an ApiError with its field", async () => {
    const refused = uploadFile(
      "etl",
      "big.jar",
      new Blob(["x"]),
      "",
      () => {},
      () =>
        new FakeXhr({
          status: 413,
          body: { error: { message: "over storage.max_file_bytes (1 MiB)", field: "body" } },
        }) as unknown as XMLHttpRequest,
    );
    await expect(refused).rejects.toEqual(new ApiError(413, "over storage.max_file_bytes (1 MiB)", "body"));
    await expect(refused).rejects.toHaveProperty("status", 413);
  });
});

describe("uploadFile cut off", () => {
  it("a connection lost mid-upload is an ApiError saying so, not a stored version", async () => {
    class CutXhr extends FakeXhr {
      send() {
        this.upload.onprogress?.({ loaded: 1, total: 4, lengthComputable: true });
        this.onerror?.();
      }
    }
    const seen: number[] = [];
    const cut = uploadFile(
      "etl",
      "a.sh",
      new Blob(["abcd"]),
      "",
      (l) => seen.push(l),
      () => new CutXhr({ status: 0, body: null }) as unknown as XMLHttpRequest,
    );
    await expect(cut).rejects.toEqual(
      new ApiError(0, "cannot reach the API server (the upload was cut off)"),
    );
    expect(seen).toEqual([1]);
  });
});
