// Every user-visible string of the task table and its Gantt column (Chinese: strings.zh.ts).

export const tTaskTable = {
  count: (n: string) => `${n} tasks`,
  zoom: "Gantt zoom",
  span: (duration: string) => `span ${duration}`,
  table: "Tasks",
  task: "Task",
  state: "State",
  attempt: "Try",
  duration: "Duration",
  log: "Log",
  timeline: "Timeline (queued ░, running █)",
  child: "child",
  childHelp: "open the sub-workflow instance",
  openLog: "log",
} as const;
