// Mutation hooks of a project's resource center: upload (with progress), delete, restore a version; each
// invalidates the project's cached folders, versions and references (the queries are in queries.ts).
import { useMutation, useQueryClient } from "@tanstack/react-query";

import { api, call } from "./client";
import { uploadFile } from "./upload";

function useResourceChange<V, R>(project: string, change: (value: V) => Promise<R>) {
  const client = useQueryClient();
  return useMutation({
    mutationFn: change,
    onSettled: () => client.invalidateQueries({ queryKey: ["resources", project] }),
  });
}

/** Upload ``file`` to ``path`` of ``project`` (a new version if it exists), reporting progress. */
export function useUploadResource(project: string) {
  return useResourceChange(
    project,
    (u: {
      path: string;
      file: Blob;
      description: string;
      onProgress: (loaded: number, total: number) => void;
    }) => uploadFile(project, u.path, u.file, u.description, u.onProgress),
  );
}

/** Delete a file or a folder (refused with the server's reason while a workflow uses it). */
export function useDeleteResource(project: string) {
  return useResourceChange(project, (path: string) =>
    call(
      api.DELETE("/api/v1/projects/{name}/resources", {
        params: { path: { name: project }, query: { path } },
      }),
    ),
  );
}

/** Restore a version of a file as its newest version. */
export function useRestoreResource(project: string) {
  return useResourceChange(project, (v: { path: string; version: number }) =>
    call(
      api.POST("/api/v1/projects/{name}/resources/restore", { params: { path: { name: project } }, body: v }),
    ),
  );
}
