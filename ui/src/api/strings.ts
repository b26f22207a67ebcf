// The API layer's own messages (when the server's answer carries none); the Chinese is in strings.zh.ts.

export const tApi = {
  answered: (status: number) => `the server answered ${status}`,
  unreachable: (detail: string) => `cannot reach the API server (${detail})`,
  uploadCut: "the upload was cut off",
} as const;
