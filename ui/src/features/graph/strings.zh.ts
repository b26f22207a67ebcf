import { translation } from "../../i18n";
import { tGraph } from "./strings";

translation(tGraph, {
  node: (name, type, state) => `${name}，${type}${state ? `，${state}` : ""}`,
  refused: (reason) => `错误：${reason}`,
});
