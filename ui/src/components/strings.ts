// User-visible strings of the shared components (the UI has no i18n library yet: a translation replaces this
// module).

export const tDateTime = {
  placeholder: "YYYY-MM-DD HH:MM",
  bad: (text: string) => `“${text}” is not a date and 24-hour time (YYYY-MM-DD HH:MM)`,
} as const;
