import { translation } from "../i18n";
import { tInstances, tOverview } from "./strings";

translation(tInstances, {
  title: "工作流实例",
  selected: (n) => `已选 ${n} 个`,
  stop: "停止",
  rerun: "重跑",
  recoverFailed: "恢复失败",
  noun: "工作流实例",
  cannotList: "无法列出工作流实例",
  id: "编号",
  name: "名称",
  state: "状态",
  runType: "运行类型",
  businessDate: "调度日期",
  started: "开始时间",
  duration: "运行时长",
  host: "主机",
  select: (id) => `选择实例 ${id}`,
  none: "没有匹配的工作流实例。",
});

translation(tOverview, {
  title: "概览",
  cannotLoad: "无法加载概览",
  what: "概览",
  lastDay: "最近 24 小时",
  lastWeek: "最近 7 天",
  noInstances: "没有实例",
  cluster: "集群",
  registryUp: "✓ 注册中心正常",
  registryDown: "✕ 注册中心不可达",
  members: (masters, workers) => `${masters} 个 Master，${workers} 个 Worker`,
  notNormal: (names) => `! 不正常：${names}`,
  running: (n) => `正在运行（${n}）`,
  all: "全部",
  since: "开始于",
  nothingRuns: "没有正在运行的实例",
  failures: "最近失败",
  failedLog: (task) => `失败任务 ${task} 的日志`,
  noFailures: "没有失败",
});
