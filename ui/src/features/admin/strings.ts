// Every user-visible string of the data-source, environment, project-parameter and worker-group screens, one
// object per component (the UI has no i18n library yet: a translation replaces this module).

export const common = {
  save: "Save",
  cancel: "Cancel",
  edit: "Edit",
  remove: "Delete",
  name: "Name",
  description: "Description",
  actions: "Actions",
  none: "—",
} as const;

export const tDataSources = {
  title: "Data sources",
  intro: "SQL and PROCEDURE tasks connect with these. Passwords are sealed at rest and never shown.",
  add: "New data source",
  newTitle: "New data source",
  editTitle: (name: string) => `Edit data source ${name}`,
  name: "Data source name",
  type: "Type",
  host: "Host",
  port: "Port",
  database: "Database",
  user: "User",
  password: "Password",
  passwordKept: "stored: leave empty to keep it",
  dsn: "DSN",
  dsnHelp: "a full postgresql:// URL instead of host, port and database",
  dsnKept: "stored: leave empty to keep it",
  other: "Session settings",
  otherHelp: (kind: string) => `one name=value a line: ${OTHER_HELP[kind] ?? "settings"}`,
  note: "Note",
  settings: "Settings (secrets masked)",
  test: "Test connection",
  testing: "testing…",
  testOk: (version: string, seconds: number) => `connected: ${version} (${seconds.toFixed(2)} s)`,
  testFailed: (error: string) => `failed: ${error}`,
  badPort: "must be a whole number from 1 to 65535",
  badOther: (line: string) => `not name=value: ${line}`,
  grants: "Granted to",
} as const;

const OTHER_HELP: Record<string, string> = {
  POSTGRESQL: "PostgreSQL server settings (e.g. search_path=etl)",
  MYSQL: "MySQL session variables (e.g. sql_mode=ANSI)",
  CLICKHOUSE: "ClickHouse query settings (e.g. max_threads=2)",
  HIVE: "Hive configuration (e.g. hive.exec.parallel=true)",
};

export const tGrants = {
  none: "nobody (admins only)",
  toProject: "project",
  toUser: "user",
  grantTo: (what: string) => `Grant ${what} to`,
  kind: (what: string) => `Grant ${what} to a project or a user`,
  projectPick: (what: string) => `Project to grant ${what} to`,
  userPick: (what: string) => `User to grant ${what} to`,
  choose: "project…",
  userPlaceholder: "user name",
  grant: "Grant",
  revoke: (what: string, to: string) => `Revoke ${what} from ${to}`,
  revokeShort: "revoke",
  project: (p: string) => `project ${p}`,
  user: (u: string) => `user ${u}`,
} as const;

export const tEnvironments = {
  title: "Environments",
  intro:
    "Shell lines (export JAVA_HOME=…, SPARK_HOME, PYTHONPATH) a task runs before its own script; a workflow or a task names one.",
  add: "New environment",
  newTitle: "New environment",
  editTitle: (name: string) => `Edit environment ${name}`,
  name: "Environment name",
  config: "Shell lines",
  configPlaceholder: "export JAVA_HOME=/opt/java",
  description: "Description",
  workerGroups: "Worker groups",
  workerGroupsHelp: "the groups it is meant for",
  groups: "Worker groups",
  projects: "Granted to",
} as const;

export const tProjectParams = {
  title: "Project parameters",
  intro:
    "Every task of the project sees them as ${name}; a workflow's global parameter of the same name wins, and a start parameter wins over both.",
  project: "Project",
  choose: "choose…",
  add: "New parameter",
  newTitle: "New project parameter",
  editTitle: (name: string) => `Edit parameter ${name}`,
  name: "Parameter name",
  value: "Value",
  valueKept: "stored secret: leave empty to keep it",
  secret: "Secret (sealed at rest, shown as ***)",
  secretYes: "secret",
  updated: "Updated",
  empty: "No parameter in this project.",
} as const;

export const tWorkerGroups = {
  title: "Worker groups",
  intro:
    "Tasks run on a live worker of their group. A group managed here lists its workers by address; a worker also stays in the group of its own configuration.",
  add: "New worker group",
  newTitle: "New worker group",
  editTitle: (name: string) => `Edit worker group ${name}`,
  name: "Worker group name",
  description: "Description",
  assigned: "Assigned workers",
  live: "Live workers",
  liveMark: "live",
  downMark: "not registered",
  fromConfig: "from workers' configuration",
  noLive: "no live worker",
  liveWorkers: "Live workers to assign",
  assign: (address: string) => `Assign ${address}`,
  noneRegistered: "No worker is registered now.",
} as const;
