// The schedule times' strings (the UI has no i18n library yet: a translation replaces this module).

export const tFires = {
  inSchedule: (zone: string) => `In the schedule's zone (${zone})`,
  inViewer: (zone: string) => `In your display zone (${zone})`,
  viewer: (time: string) => `(${time} for you)`,
  none: "no upcoming fire",
} as const;

export const tBackfillRange = {
  from: (zone: string) => `From (${zone})`,
  to: (zone: string) => `To (${zone})`,
} as const;
