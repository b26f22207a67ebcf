// Every user-visible string of the shared components (the UI has no i18n library yet: a translation replaces
// this module).

export const tDateTime = {
  placeholder: "YYYY-MM-DD HH:MM",
  bad: (text: string) => `“${text}” is not a date and 24-hour time (YYYY-MM-DD HH:MM)`,
};

export const tZone = {
  label: "Display time zone",
  utc: "UTC",
  local: (zone: string) => `Local (${zone})`,
  other: "Other zone…",
  chosen: (zone: string) => zone,
  zoneField: "IANA time zone",
  zonePlaceholder: "e.g. Asia/Shanghai, Enter to apply",
  notZone: (name: string) => `“${name}” is not an IANA time zone (e.g. Europe/Berlin)`,
  title: "Every time on the page is shown in this zone",
} as const;

export const tCommon = {
  brand: "Porpoise",
  error: "Error",
  field: (name: string) => ` — field ${name}`,
  loading: (what: string) => `Loading ${what}…`,
  connectionLost: "Connection to the server lost — retrying; what you see may be out of date.",
  batchDone: (done: number, what: string) => `${done} ${what} done`,
  batchRefused: (count: number) => `, ${count} refused:`,
  selectAll: "Select all on this page",
  pages: "Pages",
  previous: "← Previous",
  next: "Next →",
  pageOf: (page: number, pages: string, total: string, noun: string) =>
    `page ${page} of ${pages} (${total} ${noun})`,
  nothingHere: "Nothing here",
  notId: (what: string, value: string) =>
    `“${value}” is not a ${what} number: its address holds its id or code.`,
  toInstances: "Go to the instances",
} as const;

export const tLanguage = {
  label: "Language",
  title: "The language of every page (kept in this browser)",
} as const;

/** A duration's units: "850 ms", "12.5 s", "3m 20s", "2h 5m". */
export const tUnits = {
  ms: (n: string) => `${n} ms`,
  s: (n: string) => `${n} s`,
  minSec: (m: number, s: number) => `${m}m ${s}s`,
  hourMin: (h: number, m: number) => `${h}h ${m}m`,
} as const;

/** A state's name as the UI shows it (the enum stays in data-state and the badge's title). */
export const tState = {
  SUBMITTED_SUCCESS: "submitted",
  RUNNING_EXECUTION: "running",
  DISPATCH: "dispatch",
  READY_PAUSE: "ready pause",
  PAUSE: "pause",
  READY_STOP: "ready stop",
  STOP: "stop",
  READY_BLOCK: "ready block",
  BLOCK: "block",
  FAILURE: "failure",
  SUCCESS: "success",
  FORCED_SUCCESS: "forced success",
  NEED_FAULT_TOLERANCE: "needs failover",
  KILL: "kill",
  WAITING_THREAD: "waiting thread",
  WAITING_DEPEND: "waiting depend",
  DELAY_EXECUTION: "delayed",
  SERIAL_WAIT: "serial wait",
  DISABLED: "disabled",
  SKIPPED: "skipped",
} as const;

/** document.title per screen: the screen, then the object it shows, then the app ("Instance 42 · etl_daily · Porpoise"). */
export const tTitle = {
  app: "Porpoise",
  separator: " · ",
  signIn: "Sign in",
  overview: "Overview",
  instances: "Workflow instances",
  instance: (id: number) => `Instance ${id}`,
  taskLog: (id: number) => `Log of task ${id}`,
  workflows: "Workflows",
  workflow: (code: number) => `Workflow ${code}`,
  newWorkflow: "New workflow",
  editWorkflow: (code: number) => `Edit workflow ${code}`,
  cluster: "Cluster",
  alerts: "Alerts",
  resources: "Resources",
  admin: "Admin",
  tokens: "My tokens",
  notFound: "Nothing here",
} as const;

export const tSkip = {
  toContent: "Skip to content",
} as const;
