import { translation } from "../i18n";
import { tCommon, tDateTime, tLanguage, tSkip, tState, tTitle, tUnits, tZone } from "./strings";

translation(tDateTime, {
  placeholder: "YYYY-MM-DD HH:MM",
  bad: (text) => `“${text}”不是日期加 24 小时制时间（YYYY-MM-DD HH:MM）`,
});

translation(tZone, {
  label: "显示时区",
  utc: "UTC",
  local: (zone) => `本地（${zone}）`,
  other: "其他时区…",
  chosen: (zone) => zone,
  zoneField: "IANA 时区",
  zonePlaceholder: "例如 Asia/Shanghai，按回车应用",
  notZone: (name) => `“${name}”不是 IANA 时区（例如 Europe/Berlin）`,
  title: "页面上的所有时间都以此时区显示",
});

translation(tCommon, {
  brand: "Porpoise",
  error: "错误",
  field: (name) => ` — 字段 ${name}`,
  loading: (what) => `正在加载${what}…`,
  connectionLost: "与服务器的连接已断开，正在重试；页面内容可能已过期。",
  batchDone: (done, what) => `${done} 个${what}已完成`,
  batchRefused: (count) => `，${count} 个被拒绝：`,
  selectAll: "全选本页",
  pages: "分页",
  previous: "← 上一页",
  next: "下一页 →",
  pageOf: (page, pages, total, noun) => `第 ${page} / ${pages} 页（共 ${total} 个${noun}）`,
  nothingHere: "这里什么都没有",
  notId: (what, value) => `“${value}”不是${what}编号：地址中应为它的 ID 或编码。`,
  toInstances: "前往工作流实例",
});

translation(tLanguage, {
  label: "语言",
  title: "所有页面的语言（保存在此浏览器中）",
});

translation(tUnits, {
  ms: (n) => `${n} 毫秒`,
  s: (n) => `${n} 秒`,
  minSec: (m, s) => `${m} 分 ${s} 秒`,
  hourMin: (h, m) => `${h} 小时 ${m} 分`,
});

translation(tState, {
  SUBMITTED_SUCCESS: "提交成功",
  RUNNING_EXECUTION: "正在运行",
  DISPATCH: "已派发",
  READY_PAUSE: "准备暂停",
  PAUSE: "暂停",
  READY_STOP: "准备停止",
  STOP: "停止",
  READY_BLOCK: "准备阻断",
  BLOCK: "阻断",
  FAILURE: "失败",
  SUCCESS: "成功",
  FORCED_SUCCESS: "强制成功",
  NEED_FAULT_TOLERANCE: "需要容错",
  KILL: "已终止",
  WAITING_THREAD: "等待线程",
  WAITING_DEPEND: "等待依赖完成",
  DELAY_EXECUTION: "延时执行",
  SERIAL_WAIT: "串行等待",
  DISABLED: "已禁用",
  SKIPPED: "已跳过",
});

translation(tTitle, {
  app: "Porpoise",
  separator: " · ",
  signIn: "登录",
  overview: "概览",
  instances: "工作流实例",
  instance: (id) => `实例 ${id}`,
  taskLog: (id) => `任务 ${id} 的日志`,
  workflows: "工作流",
  workflow: (code) => `工作流 ${code}`,
  newWorkflow: "新建工作流",
  editWorkflow: (code) => `编辑工作流 ${code}`,
  cluster: "集群",
  alerts: "告警",
  resources: "资源中心",
  admin: "管理",
  tokens: "我的令牌",
  notFound: "页面不存在",
});

translation(tSkip, {
  toContent: "跳到主要内容",
});
