// Every user-visible string of the workflow editor: its page, graph, forms and their checks (Chinese, in
// DolphinScheduler's words: strings.zh.ts).

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

/** The editor page (pages/Editor.tsx). */
export const tEditorPage = {
  newWorkflow: "New workflow",
  edit: (name: string) => `Edit ${name}`,
  view: "Editor view",
  graph: "Graph",
  save: "Save as new version",
  notSaved: "Not saved",
  cannotLoad: "Cannot load the workflow",
  cannotLoadTypes: "Cannot load the task types",
  loadingWorkflow: (code: number) => `workflow ${code}`,
  loadingDocument: "the document",
  notDocument: (problem: string) => `Not a workflow document yet: ${problem}`,
  needsTasks: "the document needs a tasks list",
  documentText: "Workflow document",
  dangling: (names: string) => `Upstream tasks that do not exist: ${names}`,
  renameEmpty: "a task needs a name",
  renameTaken: (name: string) => `there is already a task ${name}`,
} as const;

/** The editable graph, its toolbar and its collapse buttons (EditGraph.tsx, GraphPanels.tsx,
 * CollapseButtons.tsx), and the refusals of a link (draft.ts, editorState.ts). */
export const tEditGraph = {
  layoutFailed: "Graph layout failed",
  taskType: "Task type",
  addTask: "Add task",
  autoLayout: "Auto layout",
  find: "Find a task",
  findPlaceholder: "find a task",
  noSuchTask: "no such task",
  collapse: "Collapse",
  collapseBranch: "Collapse branch",
  collapseBranchHelp: "the selected task and every task that runs only after it, as one node",
  collapseSelection: "Collapse selection",
  collapseSelectionHelp: "select with Shift or Ctrl + click, or Shift + drag",
  expandAll: (n: number) => `Expand all (${n})`,
  noBranch: (name: string) => `nothing runs only after ${name}: no branch to collapse`,
  unknownTask: "unknown task",
  alreadyWaits: (target: string, source: string) => `${target} already waits for ${source}`,
  wouldCycle: (source: string, target: string) => `${source} -> ${target} would make a cycle`,
  notLinked: (why: string) => `Not linked: ${why}`,
} as const;

/** The selected task's form and the fields built from a parameter schema (TaskForm.tsx, ParamFields.tsx,
 * schemaFields.ts). Field names (rawScript, retries...) are the document's keys and stay as they are. */
export const tTaskForm = {
  form: (name: string) => `Task ${name}`,
  heading: "Task",
  remove: "Delete task",
  task: "task",
  name: "name *",
  type: "type *",
  waitsFor: "waits for",
  waitsForNone: "nothing (drag from another task's right edge to this one)",
  unlink: (upstream: string) => `remove link from ${upstream}`,
  waitAlso: "Wait also for",
  waitAlsoPlaceholder: "wait also for…",
  link: "Link",
  parameters: (type: string) => `Parameters (${type})`,
  noSchema: "no parameter schema for this type",
  scheduling: "Scheduling",
  required: "required",
  defaultChoice: (value: string) => `default (${value})`,
  wholeNumber: "must be a whole number",
  number: "must be a number",
  notJson: (why: string) => `not JSON: ${why}`,
  /** the scheduling fields every task has: the document's keys (labels) and what each does */
  labels: {
    description: "description",
    disabled: "disabled",
    retries: "retries",
    retry_interval: "retry_interval",
    timeout: "timeout",
    timeout_strategy: "timeout_strategy",
    priority: "priority",
    worker_group: "worker_group",
    delay_time: "delay_time",
    task_group: "task_group",
    alert_on: "alert_on",
    alert_group: "alert_group",
  },
  help: {
    disabled: "switched off: never runs; its downstream runs as though it had succeeded",
    retries: "extra attempts after a failure",
    retry_interval: "minutes between a failure and the retry",
    timeout: "minutes; 0 = none",
    delay_time: "minutes to wait before the task starts",
    task_group: "task group whose slots it takes while it runs",
    alert_on: 'the task\'s own alerts, e.g. ["failure", "retry"] (failure | success | retry | timeout)',
    alert_group: "alert group of its alerts; default: the run's group",
  },
} as const;

/** The workflow's own fields (WorkflowForm.tsx). */
export const tWorkflowForm = {
  form: "Workflow",
  heading: "Workflow",
  name: "name *",
  project: "project *",
  description: "description",
  newProject: (name: string) =>
    `No project “${name}” that you can see: saving creates it, and you will own it.`,
  globals: "Global parameters",
  paramName: (n: number) => `parameter ${n} name`,
  paramValue: (n: number) => `parameter ${n} value`,
  removeParam: (prop: string) => `remove parameter ${prop}`,
  addParam: "Add parameter",
  help: "Select a task to edit it; drag from a task's right edge to another to link them.",
} as const;
