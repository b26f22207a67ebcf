import { translation } from "../../i18n";
import { tStart, tVersionDiff, tWorkflow } from "./strings";

translation(tStart, {
  title: "运行工作流",
  params: "启动参数",
  paramsHelp: "工作流的全局参数，已填入其值：修改的值只对本次运行生效",
  noParams: "此工作流没有声明全局参数。",
  prop: "参数",
  value: "值",
  valueOf: (prop) => `${prop} 的值`,
  nameOfRow: (row) => `第 ${row} 行参数的名称`,
  valueOfRow: (row) => `第 ${row} 行参数的值`,
  addParam: "添加参数",
  removeParam: (row) => `删除第 ${row} 行参数`,
  remove: "删除",
  undeclared: (known) =>
    `不是此工作流的全局参数：启动只能设置${known.length ? known.join("、") : "已声明的参数（它没有声明任何参数）"}`,
  emptyName: "有值的参数必须有名称",
  duplicate: "重复填写",
  options: "运行选项",
  failureStrategy: "失败策略",
  failureStrategies: {
    END: "结束：一个任务失败时停止正在运行的任务",
    CONTINUE: "继续：其他分支继续运行",
  },
  workerGroup: "Worker 分组",
  noLiveWorker: "没有在线的 Worker",
  warningType: "通知策略",
  warningTypes: {
    NONE: "都不发",
    SUCCESS: "成功发",
    FAILURE: "失败发",
    ALL: "成功或失败都发",
  },
  alertGroup: "告警组",
  noAlertGroup: "无",
  priority: "流程优先级",
  priorities: { HIGHEST: "最高", HIGH: "高", MEDIUM: "中", LOW: "低", LOWEST: "最低" },
  dryRun: "空跑（不执行任务，每个任务都成功）",
  startTasks: "从任务开始执行",
  startTasksHelp: "未选择：运行整个工作流",
  startTask: (name) => `从 ${name} 开始执行`,
  scope: "范围",
  scopes: {
    TASK_POST: "这些任务及其所有下游（向后执行）",
    TASK_PRE: "这些任务及其所有上游（向前执行）",
    TASK_ONLY: "仅执行这些任务",
  },
  start: "立即运行",
  starting: "正在启动…",
  cancel: "取消",
  refused: "未启动",
  fixFields: "请修正上面标出的字段",
  queued: (id) => `命令 ${id} 仍在排队：还没有 Master 接收它（Master 是否在运行？）`,
  commandRefused: "命令被拒绝",
});

translation(tWorkflow, {
  noSuch: "没有这个工作流",
  noSuchCode: (code) => `没有编码为 ${code} 的工作流（已删除，或地址输错了）。`,
  toList: "前往工作流定义",
  cannotLoad: (code) => `无法加载工作流 ${code}`,
});

translation(tVersionDiff, {
  region: (older, newer) => `从 v${older} 到 v${newer} 的变更`,
});
