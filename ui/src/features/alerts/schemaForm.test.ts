import { describe, expect, it } from "vitest";

import { outcomes, parseLog } from "./history";
import { errorPlace, fieldsOf, FormError, paramsOf, valuesOf, type AlertType } from "./schemaForm";

const EMAIL: AlertType = {
  type: "EMAIL",
  summary: "Mail the alert.",
  secret: ["password"],
  params: {
    required: ["host", "receivers"],
    properties: {
      host: { type: "string", description: "SMTP host" },
      port: { type: "integer", default: 25, description: "port" },
      receivers: { type: "array", description: "addresses" },
      password: { type: "string", writeOnly: true, format: "password", description: "password" },
      tls: { enum: ["none", "starttls", "ssl"], default: "none", description: "tls" },
      headers: { type: "object", writeOnly: true, description: "headers" },
      verbose: { type: "boolean", description: "flag" },
    },
  },
};

describe("a sender's form from its schema", () => {
  it("draws each param as the input its type needs, secrets as passwords", () => {
    const kinds = Object.fromEntries(fieldsOf(EMAIL).map((f) => [f.key, [f.kind, f.required, f.secret]]));
    expect(kinds).toEqual({
      host: ["text", true, false],
      port: ["number", false, false],
      receivers: ["list", true, false],
      password: ["password", false, true],
      tls: ["choice", false, false],
      headers: ["json", false, true],
      verbose: ["boolean", false, false],
    });
  });

  it("starts a new sender at the defaults and an edited one at its stored params, masked secrets kept", () => {
    const fields = fieldsOf(EMAIL);
    expect(valuesOf(fields, undefined, EMAIL.params)).toMatchObject({ port: "25", tls: "none", host: "" });
    const stored = { host: "smtp", receivers: ["a@x", "b@x"], password: "***", headers: { "X-Key": "***" } };
    const values = valuesOf(fields, stored);
    expect(values).toMatchObject({ receivers: "a@x, b@x", password: "***", headers: '{"X-Key":"***"}' });
    // untouched, the masked secrets go back as "***": the server keeps the stored ones
    expect(paramsOf(fields, values)).toEqual({
      host: "smtp",
      receivers: ["a@x", "b@x"],
      password: "***",
      headers: { "X-Key": "***" },
    });
  });

  it("sends numbers as numbers, leaves empty optional fields out, refuses a bad JSON object", () => {
    const fields = fieldsOf(EMAIL);
    expect(
      paramsOf(fields, { host: " h ", port: "2525", receivers: "", verbose: true, password: "" }),
    ).toEqual({
      host: "h",
      port: 2525,
      verbose: true,
    });
    expect(() => paramsOf(fields, { headers: "[1]" })).toThrow(FormError);
  });

  it("places the server's field errors", () => {
    expect(errorPlace("senders[2].params.webHook")).toEqual({ sender: 2, param: "webHook", attr: undefined });
    expect(errorPlace("senders[0].type")).toEqual({ sender: 0, param: undefined, attr: "type" });
    expect(errorPlace("name")).toEqual({ top: "name" });
    expect(errorPlace(undefined)).toEqual({});
  });
});

describe("an alert's delivery log", () => {
  it("names each sender's outcome, with the receiver's answer for a failure", () => {
    const log = parseLog('{"delivered": [7, 9], "errors": {"teams": "HTTP 500: down"}}');
    expect(outcomes(log, new Map([[7, "slack"]]), (id) => `#${id}`)).toEqual([
      { sender: "slack", delivered: true },
      { sender: "#9", delivered: true },
      { sender: "teams", delivered: false, reason: "HTTP 500: down" },
    ]);
    expect(parseLog("not json")).toEqual({ delivered: [], errors: {} });
    expect(parseLog(null)).toEqual({ delivered: [], errors: {} });
  });
});
