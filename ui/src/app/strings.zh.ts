import { translation } from "../i18n";
import { tNav } from "./strings";

translation(tNav, {
  main: "主导航",
  overview: "概览",
  instances: "工作流实例",
  workflows: "工作流定义",
  resources: "资源中心",
  cluster: "集群",
  alerts: "告警",
  admin: "管理",
  myTokens: "我的令牌",
});
