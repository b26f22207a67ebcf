// Every user-visible string of the instance filters (the UI has no i18n library yet: a translation replaces
// this module).

export const tFilters = {
  any: "any",
  state: "State",
  stateLabel: "Filter by state",
  workflow: "Workflow",
  workflowLabel: "Filter by workflow name",
  workflowPlaceholder: "name, Enter to apply",
  workflowCode: (code: string) => `workflow code ${code}`,
  clearCode: "Clear the workflow code filter",
  notCode: "a workflow code is a number: open the workflow from the Workflows page to filter by it",
  project: "Project",
  projectLabel: "Filter by project",
  runType: "Run type",
  runTypeLabel: "Filter by run type",
  from: (zone: string) => `Business date from (${zone})`,
  until: (zone: string) => `to (${zone})`,
  fromLabel: "Business date from",
  untilLabel: "Business date to",
  datePlaceholder: "YYYY-MM-DD HH:mm",
  notDate: (text: string) => `“${text}” is not a date: YYYY-MM-DD, or YYYY-MM-DD HH:mm`,
  host: "Host",
  hostLabel: "Filter by host",
  hostPlaceholder: "host:port, Enter to apply",
  clear: "Clear filters",
} as const;

// "Why isn't it running?": the owning master's reason for each waiting task (engine/api/waiting.py).
export const tWaiting = {
  heading: "Why isn't it running?",
  column: "Waiting for",
  noWorker: (group: string) => `no live worker in group ${group}`,
  workersBusy: (group: string) => `every worker of group ${group} is busy: `,
  full: (address: string, running: number, slots: number) => `${address} full (${running} of ${slots} slots)`,
  overloaded: (address: string, detail: string) =>
    detail ? `${address} overloaded (${detail})` : `${address} overloaded`,
  draining: (address: string) => `${address} draining`,
  taskGroup: (group: string, position: number, queued: number, used: number, size: number) =>
    `task group ${group}: position ${position} of ${queued} in its queue, ${used} of ${size} slots used`,
  retry: (retry: number, retries: number) => `retry ${retry} of ${retries}, due at `,
  delay: "delayed: starts at ",
  dispatching: "being sent to a worker",
  dispatched: (host: string) => `sent to ${host}, not started yet`,
  logic: (type: string) => `checked by the master (${type})`,
  nextCheck: ", next check at ",
  preparing: "being prepared for dispatch",
  serialWait: "This run waits for its turn (serial execution) behind ",
  serialRun: (id: number, name: string, state: string) => `#${id} ${name} (${state})`,
  serialNone: "no active run (it is about to be woken)",
  serialPlace: (position: number, waiting: number) => `; position ${position} of ${waiting} waiting runs`,
  serialReason: (reason: string) => `The master recorded: ${reason}`,
  pausing: "The run is pausing: no new task starts.",
  stopping: "The run is stopping: no new task starts.",
  unknown: {
    silent: (host: string) => `reason unknown: master ${host} did not answer`,
    not_owner: (host: string) => `reason unknown: master ${host} does not drive this run now (failing over?)`,
    no_owner: () => "reason unknown: no master has taken this run yet",
  },
} as const;
