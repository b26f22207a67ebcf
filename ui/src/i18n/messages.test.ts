// The messages the .ts helpers build (API errors, a field's refused value, a refused link or collapse) follow
// the language like the screens' strings: read at the time they are built, in the active locale.
import { afterEach, beforeAll, describe, expect, it } from "vitest";

import { loadLocale } from "./catalog";
import { setLocale } from "./index";
import { errorOf } from "../api/client";
import { connect } from "../features/editor/draft";
import { fromText, type Field } from "../features/editor/schemaFields";
import { collapse, NO_GROUPS } from "../features/graph/collapse";

// the Chinese dictionaries, loaded as the header's switch loads them
beforeAll(() => loadLocale("zh-CN"));

const field: Field = { name: "n", kind: "integer", required: false, description: "", options: [] };
const draft = {
  name: "w",
  project: "p",
  tasks: [
    { name: "a", type: "SHELL" },
    { name: "b", type: "SHELL", upstream: ["a"] },
  ],
};

afterEach(() => setLocale("en"));

describe("the helpers' messages", () => {
  it("are English by default and Chinese once the locale is zh-CN", () => {
    const built = () => [
      errorOf(502, undefined).message,
      fromText(field, "1.5").problem,
      connect(draft, "b", "a").refused,
      collapse(draft.tasks, NO_GROUPS, ["a"]).refused,
    ];
    expect(built()).toEqual([
      "the server answered 502",
      "must be a whole number",
      "b -> a would make a cycle",
      "choose at least two tasks (or a task with a branch)",
    ]);
    setLocale("zh-CN");
    expect(built()).toEqual([
      "服务器返回 502",
      "必须是整数",
      "b -> a 会形成环",
      "请至少选择两个任务（或一个带分支的任务）",
    ]);
  });
});
