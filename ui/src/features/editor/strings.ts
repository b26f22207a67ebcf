// User-visible strings the editor page added for issue 28 (the UI has no i18n library yet: a translation
// replaces this module).

export const tEditor = {
  createProject: (name: string) =>
    `No project “${name}” that you can see: saving creates it, and you will own it. A typo?`,
  createAndSave: (name: string) => `Create project ${name} and save`,
  pickProject: "Pick another project",
} as const;
