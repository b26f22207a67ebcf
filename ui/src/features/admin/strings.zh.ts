import { translation } from "../../i18n";
import { common, tDataSources, tEnvironments, tGrants, tProjectParams, tWorkerGroups } from "./strings";

translation(common, {
  save: "保存",
  cancel: "取消",
  edit: "编辑",
  remove: "删除",
  name: "名称",
  description: "描述",
  actions: "操作",
  none: "—",
});

const OTHER_HELP: Record<string, string> = {
  POSTGRESQL: "PostgreSQL 服务器参数（例如 search_path=etl）",
  MYSQL: "MySQL 会话变量（例如 sql_mode=ANSI）",
  CLICKHOUSE: "ClickHouse 查询设置（例如 max_threads=2）",
  HIVE: "Hive 配置（例如 hive.exec.parallel=true）",
};

translation(tDataSources, {
  title: "数据源中心",
  intro: "SQL 和 PROCEDURE 任务通过这些数据源连接。密码加密存储，从不显示。",
  add: "创建数据源",
  newTitle: "创建数据源",
  editTitle: (name) => `编辑数据源 ${name}`,
  name: "数据源名称",
  type: "数据源类型",
  host: "主机",
  port: "端口",
  database: "数据库名",
  user: "用户名",
  password: "密码",
  passwordKept: "已保存：留空即不修改",
  dsn: "DSN",
  dsnHelp: "完整的 postgresql:// URL，代替主机、端口和数据库",
  dsnKept: "已保存：留空即不修改",
  other: "连接参数",
  otherHelp: (kind) => `每行一个 name=value：${OTHER_HELP[kind] ?? "设置"}`,
  note: "备注",
  settings: "设置（密钥已隐藏）",
  test: "测试连接",
  testing: "正在测试…",
  testOk: (version, seconds) => `连接成功：${version}（${seconds.toFixed(2)} 秒）`,
  testFailed: (error) => `失败：${error}`,
  badPort: "必须是 1 到 65535 之间的整数",
  badOther: (line) => `不是 name=value：${line}`,
  grants: "授权给",
});

translation(tGrants, {
  none: "无人（仅管理员）",
  toProject: "项目",
  toUser: "用户",
  grantTo: (what) => `将${what}授权给`,
  kind: (what) => `将${what}授权给项目或用户`,
  projectPick: (what) => `要授予${what}的项目`,
  userPick: (what) => `要授予${what}的用户`,
  choose: "项目…",
  userPlaceholder: "用户名",
  grant: "授权",
  revoke: (what, to) => `撤销${to}的${what}授权`,
  revokeShort: "撤销",
  project: (p) => `项目 ${p}`,
  user: (u) => `用户 ${u}`,
});

translation(tEnvironments, {
  title: "环境管理",
  intro:
    "任务在自己的脚本之前执行的 Shell 语句（export JAVA_HOME=…、SPARK_HOME、PYTHONPATH）；工作流或任务指定使用哪个环境。",
  add: "创建环境",
  newTitle: "创建环境",
  editTitle: (name) => `编辑环境 ${name}`,
  name: "环境名称",
  config: "环境配置（Shell 语句）",
  description: "描述",
  workerGroups: "Worker 分组",
  workerGroupsHelp: "此环境适用的分组",
  groups: "Worker 分组",
  projects: "授权给",
});

translation(tProjectParams, {
  title: "项目级参数",
  intro: "项目中的每个任务都能以 ${name} 使用它们；工作流中同名的全局参数优先，启动参数又优先于两者。",
  project: "项目",
  choose: "请选择…",
  add: "创建参数",
  newTitle: "创建项目级参数",
  editTitle: (name) => `编辑参数 ${name}`,
  name: "参数名称",
  value: "参数值",
  valueKept: "已保存的密钥：留空即不修改",
  secret: "密钥（加密存储，显示为 ***）",
  secretYes: "密钥",
  updated: "更新时间",
  empty: "此项目没有参数。",
});

translation(tWorkerGroups, {
  title: "Worker 分组管理",
  intro:
    "任务在其分组中的在线 Worker 上运行。在此管理的分组按地址列出其 Worker；Worker 也始终属于自身配置中的分组。",
  add: "创建 Worker 分组",
  newTitle: "创建 Worker 分组",
  editTitle: (name) => `编辑 Worker 分组 ${name}`,
  name: "分组名称",
  description: "描述",
  assigned: "已分配的 Worker",
  live: "在线 Worker",
  liveMark: "在线",
  downMark: "未注册",
  fromConfig: "来自 Worker 的配置",
  noLive: "没有在线的 Worker",
  liveWorkers: "可分配的在线 Worker",
  assign: (address) => `分配 ${address}`,
  noneRegistered: "当前没有已注册的 Worker。",
});
