// Every user-visible string of a workflow's schedules and its backfill dialog; the Chinese is in
// scheduleStrings.zh.ts.

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

export const tBackfill = {
  title: "Backfill",
  mode: "Mode",
  modes: { SERIAL: "serial", PARALLEL: "parallel" },
  chains: "Chains at once",
  refused: "Backfill refused",
  queued: (dates: number, chains: number) => `${dates} dates queued in ${chains} chain(s)`,
  submit: "Queue backfill",
  close: "Close",
} as const;

export const tSchedules = {
  title: "Schedules",
  add: "New schedule",
  cannotList: "Cannot list schedules",
  refused: "Refused",
  crontab: "Crontab",
  zone: "Zone",
  state: "State",
  nextFire: "Next fire",
  online: "● online",
  offline: "○ offline",
  edit: "Edit",
  putOnline: "Online",
  putOffline: "Offline",
  none: "no schedule",
  form: "Schedule",
  crontabHelp: "Crontab (5 fields, or Quartz with seconds)",
  crontabLabel: "Crontab",
  timezone: "Time zone",
  invalid: "Not a valid schedule",
  save: "Save",
  cancel: "Cancel",
} as const;
