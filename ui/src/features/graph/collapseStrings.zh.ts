import { translation } from "../../i18n";
import { tCollapse } from "./collapseStrings";

translation(tCollapse, {
  tooFew: "请至少选择两个任务（或一个带分支的任务）",
  cycle: "有路径离开这些任务后又回到其中：折叠会形成环",
});
