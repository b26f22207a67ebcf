import { translation } from "../../i18n";
import { tTaskTable } from "./strings";

translation(tTaskTable, {
  count: (n) => `${n} 个任务`,
  zoom: "甘特图缩放",
  span: (duration) => `跨度 ${duration}`,
  table: "任务",
  task: "任务",
  state: "状态",
  attempt: "尝试",
  duration: "运行时长",
  log: "日志",
  timeline: "时间线（排队 ░，运行 █）",
  child: "子工作流",
  childHelp: "打开子工作流实例",
  openLog: "日志",
});
