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
