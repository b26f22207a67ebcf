// The messages the editor's pure helpers build (a field's value refused, a link refused); the Chinese is in
// editStrings.zh.ts.

export const tEdits = {
  wholeNumber: "must be a whole number",
  number: "must be a number",
  notJson: (detail: string) => `not JSON: ${detail}`,
  unknownTask: "unknown task",
  alreadyWaits: (target: string, source: string) => `${target} already waits for ${source}`,
  cycle: (source: string, target: string) => `${source} -> ${target} would make a cycle`,
  notLinked: (reason: string) => `Not linked: ${reason}`,
} as const;
