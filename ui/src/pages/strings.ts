// Every user-visible string of the pages (src/pages), one object per page; the Chinese is in strings.zh.ts.

export const tInstances = {
  title: "Workflow instances",
  selected: (n: number) => `${n} selected`,
  stop: "Stop",
  rerun: "Rerun",
  recoverFailed: "Recover failed",
  noun: "instances",
  cannotList: "Cannot list instances",
  id: "Id",
  name: "Name",
  state: "State",
  runType: "Run type",
  businessDate: "Business date",
  started: "Started",
  duration: "Duration",
  host: "Host",
  select: (id: number) => `Select instance ${id}`,
  none: "No instance matches.",
} as const;

export const tOverview = {
  title: "Overview",
  cannotLoad: "Cannot load the overview",
  what: "overview",
  lastDay: "Last 24 hours",
  lastWeek: "Last 7 days",
  noInstances: "no instances",
  cluster: "Cluster",
  registryUp: "✓ registry up",
  registryDown: "✕ registry unreachable",
  members: (masters: number, workers: number) => `${masters} masters, ${workers} workers`,
  notNormal: (names: string) => `! not normal: ${names}`,
  running: (n: number) => `Running now (${n})`,
  all: "all",
  since: "since",
  nothingRuns: "nothing runs",
  failures: "Recent failures",
  failedLog: (task: string) => `log of failed task ${task}`,
  noFailures: "no failures",
} as const;

export const tSignIn = {
  firstTime:
    "First sign-in: the standalone (make run) prints user admin's first password in its start banner, and keeps " +
    "it in admin-password in its run directory until you change it. On a cluster, your admin makes your user " +
    "(porpoise user create), or gives you an API token.",
  with: "Sign in with",
  userAndPassword: "User and password",
  apiToken: "API token",
  signIn: "Sign in",
  user: "User",
  password: "Password",
  tokenPlaceholder: "the token from `make run` or `porpoise token create`",
  failed: "Sign-in failed",
  cookieHint: "A session cookie for this browser; changes also need this tab's CSRF token.",
  tokenHint: "The token is kept for this browser tab only.",
} as const;

export const tNotFound = {
  noPage: "There is no page at this address.",
} as const;

export const tAdmin = {
  title: "Admin",
  sections: "Admin sections",
  tabs: {
    users: "Users",
    grants: "Project grants",
    tenants: "Tenants",
    datasources: "Data sources",
    environments: "Environments",
    "project-params": "Project parameters",
    "worker-groups": "Worker groups",
    alerts: "Alert groups",
    "task-groups": "Task groups",
    tokens: "API tokens",
  },
} as const;

export const tWorkflows = {
  title: "Workflows",
  newWorkflow: "New workflow",
  searchLabel: "Search workflows by name",
  searchPlaceholder: "Search by name",
  releaseLabel: "Release state",
  bothStates: "online and offline",
  online: "online",
  offline: "offline",
  start: "Start",
  putOnline: "Online",
  putOffline: "Offline",
  noun: "workflows",
  cannotList: "Cannot list workflows",
  name: "Name",
  project: "Project",
  version: "Version",
  release: "Release",
  lastRuns: "Last runs (newest left)",
  nextFire: "Next fire",
  updated: "Updated",
  select: (name: string) => `Select ${name}`,
  versionOf: (v: number) => `v${v}`,
  isOnline: "● online",
  isOffline: "○ offline",
  run: (id: number, state: string) => `instance ${id}: ${state}`,
  none: "No workflow matches.",
} as const;
