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
