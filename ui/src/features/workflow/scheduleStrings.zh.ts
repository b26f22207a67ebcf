import { translation } from "../../i18n";
import { tBackfillRange, tFires } from "./scheduleStrings";

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
