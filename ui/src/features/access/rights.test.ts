import { describe, expect, it } from "vitest";

import type { Me } from "../../api/client";
import { lacking, lackingAdmin, lackingCreate } from "./rights";

const reader: Me = {
  id: 2,
  name: "rita",
  admin: false,
  via: "session",
  token_perms: null,
  projects: [
    { code: 11, name: "ux", perms: ["READ"] },
    { code: 12, name: "ops", perms: ["READ", "EXECUTE"] },
  ],
};

describe("lacking", () => {
  it("names the right and the project a read-only user lacks", () => {
    expect(lacking(reader, "ux", "EXECUTE")).toBe("needs EXECUTE on project ux");
    expect(lacking(reader, 11, "WRITE")).toBe("needs WRITE on project ux");
    expect(lacking(reader, "ops", "EXECUTE")).toBeNull();
    expect(lacking(reader, 12, "READ")).toBeNull();
  });
  it("lets an admin do everything, and holds actions back until the rights are known", () => {
    expect(lacking({ ...reader, admin: true, projects: [] }, "ux", "WRITE")).toBeNull();
    expect(lacking(undefined, "ux", "READ")).toBe("checking your rights…");
  });
  it("refuses creating with a token lacking WRITE, and the admin screens to non-admins", () => {
    expect(lackingCreate(reader)).toBeNull();
    expect(lackingCreate({ ...reader, via: "token", token_perms: ["READ"] })).toBe(
      "this token does not carry WRITE",
    );
    expect(lackingAdmin(reader)).toBe("only an admin may do this");
    expect(lackingAdmin({ ...reader, admin: true })).toBeNull();
  });
});
