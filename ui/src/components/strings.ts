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
