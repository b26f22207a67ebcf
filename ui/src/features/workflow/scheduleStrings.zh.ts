import { translation } from "../../i18n";
import { tBackfill, tBackfillRange, tFires, tSchedules } from "./scheduleStrings";

translation(tFires, {
  inSchedule: (zone) => `按调度的时区（${zone}）`,
  inViewer: (zone) => `按你的显示时区（${zone}）`,
  viewer: (time) => `（你的时间 ${time}）`,
  none: "没有即将触发的调度",
});

translation(tBackfillRange, {
  from: (zone) => `开始（${zone}）`,
  to: (zone) => `结束（${zone}）`,
});

translation(tBackfill, {
  title: "补数",
  mode: "执行方式",
  modes: { SERIAL: "串行执行", PARALLEL: "并行执行" },
  chains: "并行度",
  refused: "补数被拒绝",
  queued: (dates, chains) => `已提交 ${dates} 个日期的补数，分 ${chains} 条链执行`,
  submit: "提交补数",
  close: "关闭",
});

translation(tSchedules, {
  title: "定时管理",
  add: "创建定时",
  cannotList: "无法列出定时",
  refused: "被拒绝",
  crontab: "Crontab",
  zone: "时区",
  state: "状态",
  nextFire: "下次调度时间",
  online: "● 已上线",
  offline: "○ 已下线",
  edit: "编辑",
  putOnline: "上线",
  putOffline: "下线",
  none: "没有定时",
  form: "定时",
  crontabHelp: "Crontab（5 个字段，或带秒的 Quartz 表达式）",
  crontabLabel: "Crontab 表达式",
  timezone: "时区",
  invalid: "不是有效的定时",
  save: "保存",
  cancel: "取消",
});
