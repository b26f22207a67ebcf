// User-visible strings the editor page added for issue 28 (the UI has no i18n library yet: a translation
// replaces this module).

export const tEditor = {
  createProject: (name: string) =>
    `No project “${name}” that you can see: saving creates it, and you will own it. A typo?`,
  createAndSave: (name: string) => `Create project ${name} and save`,
  pickProject: "Pick another project",
  // local parameters (LocalParams.tsx)
  localParams: "Local parameters",
  localParamsNone: "none",
  paramProp: "prop",
  paramDirect: "direction",
  paramType: "type",
  paramValue: "value",
  addParam: "Add parameter",
  removeParam: (prop: string) => `Remove parameter ${prop || "(unnamed)"}`,
  paramNeedsName: "needs a name",
  paramDuplicate: (prop: string) => `${prop} is declared twice`,
  paramBadValue: (type: string, why: string) => `not a ${type}: ${why}`,
  paramWhyInteger: "a whole number",
  paramWhyNumber: "a number",
  paramWhyBoolean: "true or false",
  paramWhyDate: "yyyy-MM-dd",
  paramWhyTime: "HH:mm:ss",
  paramWhyTimestamp: "yyyy-MM-dd HH:mm:ss",
  paramWhyList: "a JSON list",
  paramsInvalid: (n: number) => `${n} local parameter(s) to fix before saving`,
  // SWITCH branches (SwitchBranches.tsx)
  branches: "Branches",
  branchCondition: "condition",
  branchNext: "then run",
  branchDefault: "default",
  branchDefaultHelp: "the task run when no condition holds",
  branchNone: "— none —",
  addBranch: "Add branch",
  removeBranch: (n: number) => `Remove branch ${n}`,
  branchHint:
    "Picking a task links it below this one. ${name} is a parameter's value (quote it for a string).",
  edgeDefault: "default",
  // the code editor (CodeField.tsx)
  codeLoading: "loading the editor…",
  codeHint: "Esc then Tab leaves the editor",
  // the rendered script (RenderedScript.tsx)
  renderedScript: (field: string) => `Rendered ${field} (as this attempt ran it)`,
  renderedNone: "no rendered script in this attempt's log",
  renderedLoading: "reading the log…",
} as const;
