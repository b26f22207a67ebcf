// Every user-visible string of the app's frame (the header's navigation).

export const tNav = {
  main: "Main",
  overview: "Overview",
  instances: "Instances",
  workflows: "Workflows",
  resources: "Resources",
  cluster: "Cluster",
  alerts: "Alerts",
  admin: "Admin",
  myTokens: "My tokens",
} as const;
