// Why tasks cannot be collapsed into a group; the Chinese is in collapseStrings.zh.ts.

export const tCollapse = {
  tooFew: "choose at least two tasks (or a task with a branch)",
  cycle: "a path leaves these tasks and comes back into them: collapsing would draw a cycle",
} as const;
