import { translation } from "../../i18n";
import { tEdits } from "./editStrings";

translation(tEdits, {
  wholeNumber: "必须是整数",
  number: "必须是数字",
  notJson: (detail) => `不是 JSON：${detail}`,
  unknownTask: "未知任务",
  alreadyWaits: (target, source) => `${target} 已依赖 ${source}`,
  cycle: (source, target) => `${source} -> ${target} 会形成环`,
  notLinked: (reason) => `未连线：${reason}`,
});
