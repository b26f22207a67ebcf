import { translation } from "../../i18n";
import { tEditor } from "./strings";

translation(tEditor, {
  createProject: (name) => `没有你可见的项目“${name}”：保存会创建它，并由你所有。是否输错了？`,
  createAndSave: (name) => `创建项目 ${name} 并保存`,
  pickProject: "选择其他项目",
});
