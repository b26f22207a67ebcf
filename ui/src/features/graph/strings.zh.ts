import { translation } from "../../i18n";
import { tDag, tGraph } from "./strings";

translation(tGraph, {
  node: (name, type, state) => `${name}，${type}${state ? `，${state}` : ""}`,
  refused: (reason) => `错误：${reason}`,
});

translation(tDag, {
  layoutFailed: "图形布局失败",
  loading: "图形布局",
  error: "错误",
  groupDetail: (count, types, states) => `${count} 个任务：${types}${states ? `；${states}` : ""}`,
  expandGroup: (label, count) => `展开 ${label}（${count} 个任务）`,
  expand: "展开",
  tooFew: "请至少选择两个任务（或一个带分支的任务）",
  cycle: "有路径离开这些任务后又回到其中：折叠会形成环",
});
