import { translation } from "../../i18n";
import { tFilters } from "./strings";

translation(tFilters, {
  any: "全部",
  state: "状态",
  stateLabel: "按状态筛选",
  workflow: "工作流",
  workflowLabel: "按工作流名称筛选",
  workflowPlaceholder: "名称，按回车应用",
  workflowCode: (code) => `工作流编码 ${code}`,
  clearCode: "清除工作流编码筛选",
  notCode: "工作流编码是数字：请从工作流定义页面打开工作流再按它筛选",
  project: "项目",
  projectLabel: "按项目筛选",
  runType: "运行类型",
  runTypeLabel: "按运行类型筛选",
  from: (zone) => `调度日期从（${zone}）`,
  until: (zone) => `至（${zone}）`,
  fromLabel: "调度日期从",
  untilLabel: "调度日期至",
  datePlaceholder: "YYYY-MM-DD HH:mm",
  notDate: (text) => `“${text}”不是日期：YYYY-MM-DD 或 YYYY-MM-DD HH:mm`,
  host: "主机",
  hostLabel: "按主机筛选",
  hostPlaceholder: "主机:端口，按回车应用",
  clear: "清除筛选",
});
