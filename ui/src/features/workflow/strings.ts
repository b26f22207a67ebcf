// Every user-visible string of the start dialog and the workflow page's new messages (the UI has no i18n library yet: a translation replaces this
// module).

export const tStart = {
  title: "Start the workflow",
  params: "Parameters",
  paramsHelp: "the workflow's global parameters, pre-filled with its values: a changed value is this run's",
  noParams: "This workflow declares no global parameter.",
  prop: "Parameter",
  value: "Value",
  valueOf: (prop: string) => `Value of ${prop}`,
  nameOfRow: (row: number) => `Name of parameter row ${row}`,
  valueOfRow: (row: number) => `Value of parameter row ${row}`,
  addParam: "Add a parameter",
  removeParam: (row: number) => `Remove parameter row ${row}`,
  remove: "remove",
  undeclared: (known: readonly string[]) =>
    `not a global parameter of this workflow: a start sets only ${known.length ? known.join(", ") : "declared ones (it declares none)"}`,
  emptyName: "a value needs a parameter name",
  duplicate: "given twice",
  options: "Run options",
  failureStrategy: "Failure strategy",
  failureStrategies: {
    END: "End: stop the running tasks when one fails",
    CONTINUE: "Continue: the other branches go on",
  },
  workerGroup: "Worker group",
  noLiveWorker: "no live worker",
  warningType: "Notify",
  warningTypes: {
    NONE: "never",
    SUCCESS: "on success",
    FAILURE: "on failure",
    ALL: "on success and on failure",
  },
  alertGroup: "Alert group",
  noAlertGroup: "none",
  priority: "Priority",
  priorities: { HIGHEST: "highest", HIGH: "high", MEDIUM: "medium", LOW: "low", LOWEST: "lowest" },
  dryRun: "Dry run (tasks are not executed, every task succeeds)",
  startTasks: "Start from tasks",
  startTasksHelp: "none picked: the whole workflow",
  startTask: (name: string) => `Start from ${name}`,
  scope: "With",
  scopes: {
    TASK_POST: "the tasks and everything downstream",
    TASK_PRE: "the tasks and everything upstream",
    TASK_ONLY: "only the tasks",
  },
  start: "Start now",
  starting: "starting…",
  cancel: "Cancel",
  refused: "Not started",
  fixFields: "fix the fields marked above",
  queued: (id: number) => `command ${id} is still queued: no master claimed it yet (is one running?)`,
  commandRefused: "the command was refused",
} as const;

export const tWorkflow = {
  noSuch: "No such workflow",
  noSuchCode: (code: number) => `No workflow has the code ${code} (deleted, or a mistyped address).`,
  toList: "Go to the workflows",
  cannotLoad: (code: number) => `Cannot load workflow ${code}`,
} as const;

/** The version diff (workflow page). */
export const tVersionDiff = {
  region: (older: number, newer: number) => `Changes from v${older} to v${newer}`,
} as const;

export type Priority = keyof typeof tStart.priorities;
export type FailureStrategy = keyof typeof tStart.failureStrategies;
export type WarningType = keyof typeof tStart.warningTypes;
export type Scope = keyof typeof tStart.scopes;
