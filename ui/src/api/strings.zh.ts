import { translation } from "../i18n";
import { tApi } from "./strings";

translation(tApi, {
  answered: (status) => `服务器返回 ${status}`,
  unreachable: (detail) => `无法连接 API 服务器（${detail}）`,
  uploadCut: "上传被中断",
});
