import { translation } from "../i18n";
import { tAdmin, tInstances, tNotFound, tOverview, tSignIn, tWorkflows } from "./strings";

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

translation(tSignIn, {
  firstTime:
    "首次登录：单机版（make run）在启动横幅中打印 admin 用户的初始密码，并在你修改之前将其保存在运行目录的 " +
    "admin-password 文件中。在集群中，由管理员为你创建用户（porpoise user create），或给你一个 API 令牌。",
  with: "登录方式",
  userAndPassword: "用户名和密码",
  apiToken: "API 令牌",
  signIn: "登录",
  user: "用户名",
  password: "密码",
  tokenPlaceholder: "`make run` 或 `porpoise token create` 给出的令牌",
  failed: "登录失败",
  cookieHint: "为此浏览器保存会话 Cookie；修改操作还需要此标签页的 CSRF 令牌。",
  tokenHint: "令牌只保存在此浏览器标签页中。",
});

translation(tNotFound, {
  noPage: "此地址没有页面。",
});

translation(tAdmin, {
  title: "管理",
  sections: "管理分区",
  tabs: {
    users: "用户管理",
    grants: "项目授权",
    tenants: "租户管理",
    datasources: "数据源中心",
    environments: "环境管理",
    "project-params": "项目级参数",
    "worker-groups": "Worker 分组管理",
    alerts: "告警组管理",
    "task-groups": "任务组管理",
    tokens: "令牌管理",
  },
});

translation(tWorkflows, {
  title: "工作流定义",
  newWorkflow: "创建工作流",
  searchLabel: "按名称搜索工作流",
  searchPlaceholder: "按名称搜索",
  releaseLabel: "上线状态",
  bothStates: "已上线和已下线",
  online: "已上线",
  offline: "已下线",
  start: "运行",
  putOnline: "上线",
  putOffline: "下线",
  noun: "工作流",
  cannotList: "无法列出工作流",
  name: "工作流名称",
  project: "项目",
  version: "版本",
  release: "上线状态",
  lastRuns: "最近运行（最新在左）",
  nextFire: "下次调度",
  updated: "更新时间",
  select: (name) => `选择 ${name}`,
  versionOf: (v) => `V${v}`,
  isOnline: "● 已上线",
  isOffline: "○ 已下线",
  run: (id, state) => `实例 ${id}：${state}`,
  none: "没有匹配的工作流。",
});
