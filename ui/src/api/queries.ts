// Query keys and hooks: components reach the API only through src/api (eslint.config.js refuses the raw client,
// fetch, XMLHttpRequest and EventSource anywhere else). This module holds the shared queries; per-area hooks are
// in admin.ts, alerts.ts, workflows.ts, resources.ts and session.ts (each mutation invalidates what it changes),
// and the transports in stream.ts (live events, a log's follow), upload.ts, logs.ts and download.ts.
import { queryOptions, useMutation, useQuery, useQueryClient } from "@tanstack/react-query";

import { api, call, type ControlResult, type Waiting, type WorkflowDoc } from "./client";

export interface InstanceFilters {
  state?: string;
  workflow?: number;
  workflow_name?: string;
  project?: string;
  run_type?: string;
  schedule_since?: string;
  schedule_until?: string;
  host?: string;
  since?: string;
  page: number;
  size: number;
}

export const keys = {
  instances: (f: InstanceFilters) => ["instances", f] as const,
  instance: (id: number) => ["instance", id] as const,
  workflows: (f: object) => ["workflows", f] as const,
  workflow: (code: number) => ["workflow", code] as const,
  version: (code: number, version: number) => ["workflow-version", code, version] as const,
  cluster: ["cluster"] as const,
  task: (id: number) => ["task", id] as const,
  me: ["me"] as const,
};

/** Who is signed in, admin or not, and their rights on each project they see (actions follow them). */
export const meQuery = queryOptions({
  queryKey: keys.me,
  queryFn: () => call(api.GET("/api/v1/me")),
  staleTime: 60_000,
});

export function useMe() {
  return useQuery(meQuery);
}

export function useInstances(f: InstanceFilters) {
  return useQuery({
    queryKey: keys.instances(f),
    queryFn: () => call(api.GET("/api/v1/instances", { params: { query: f } })),
    placeholderData: (previous) => previous,
  });
}

export const instanceQuery = (id: number) =>
  queryOptions({
    queryKey: keys.instance(id),
    queryFn: () => call(api.GET("/api/v1/instances/{id}", { params: { path: { id: String(id) } } })),
  });

export function useInstance(id: number) {
  return useQuery(instanceQuery(id));
}

/** Whether an answer of /waiting names anything waiting (then it is asked again). */
export function somethingWaits(answer: Waiting | undefined): boolean {
  return !!answer && (answer.tasks.length > 0 || answer.serial_wait !== null || answer.unknown !== null);
}

/** Why the instance's tasks not running yet wait, from its owning master. Asked when ``active`` (the
 * instance is unfinished) and again whenever ``signature`` changes (the live stream moved a task), and
 * polled every 3 s only while the last answer names something waiting. */
export function useWaiting(id: number, active: boolean, signature: string) {
  return useQuery({
    queryKey: ["waiting", id, signature],
    enabled: active,
    queryFn: () => call(api.GET("/api/v1/instances/{id}/waiting", { params: { path: { id: String(id) } } })),
    refetchInterval: (query) => (somethingWaits(query.state.data) ? 3000 : false),
    placeholderData: (previous) => previous,
  });
}

/** Every attempt of an instance's tasks (retries, failovers), for the per-attempt tabs of a task's log. */
export function useAttempts(instanceId: number | undefined) {
  return useQuery({
    queryKey: ["attempts", instanceId],
    enabled: instanceId !== undefined,
    queryFn: () =>
      call(
        api.GET("/api/v1/instances/{id}", {
          params: { path: { id: String(instanceId) }, query: { all_attempts: true } },
        }),
      ),
  });
}

/** A version's document never changes: cached for the session. */
/** A stored workflow version (immutable: never stale). */
export const versionQuery = (code: number, version: number) =>
  queryOptions({
    queryKey: keys.version(code, version),
    staleTime: Infinity,
    queryFn: () =>
      call(
        api.GET("/api/v1/workflows/{code}/versions/{version}", {
          params: { path: { code: String(code), version: String(version) } },
        }),
      ),
  });

export function useWorkflowVersion(code: number | undefined, version: number | undefined) {
  return useQuery({
    ...versionQuery(code ?? 0, version ?? 0),
    enabled: code !== undefined && version !== undefined,
  });
}

export function useWorkflows(f: {
  search?: string;
  release_state?: "ONLINE" | "OFFLINE";
  page: number;
  size: number;
}) {
  return useQuery({
    queryKey: keys.workflows(f),
    queryFn: () => call(api.GET("/api/v1/workflows", { params: { query: f } })),
    placeholderData: (previous) => previous,
  });
}

/** Names of the workflows the caller may see that contain ``search`` (the instance filter's autocomplete). */
export function useWorkflowNames(search: string) {
  return useQuery({
    queryKey: ["workflow-names", search],
    queryFn: () => call(api.GET("/api/v1/workflows", { params: { query: { search, size: 20 } } })),
    select: (page) => [...new Set(page.items.map((w) => w.name))],
    placeholderData: (previous) => previous,
    staleTime: 30_000,
  });
}

/** Names of the projects the caller may see. */
export function useProjectNames() {
  return useQuery({
    queryKey: ["project-names"],
    queryFn: () => call(api.GET("/api/v1/projects", { params: { query: { size: 500 } } })),
    select: (page) => page.items.map((p) => p.name),
    staleTime: 60_000,
  });
}

/** A workflow's current definition; ``null``: none (a new workflow's editor), nothing is fetched. */
export function useWorkflow(code: number | null) {
  return useQuery({
    queryKey: keys.workflow(code ?? 0),
    queryFn: () => call(api.GET("/api/v1/workflows/{code}", { params: { path: { code: String(code) } } })),
    enabled: code !== null,
  });
}

export function useVersions(code: number) {
  return useQuery({
    queryKey: ["workflow-versions", code],
    queryFn: () =>
      call(
        api.GET("/api/v1/workflows/{code}/versions", {
          params: { path: { code: String(code) }, query: { size: 100 } },
        }),
      ),
  });
}

export function useCluster() {
  return useQuery({
    queryKey: keys.cluster,
    queryFn: () => call(api.GET("/api/v1/cluster")),
    refetchInterval: 10_000,
  });
}

export function useOverview() {
  return useQuery({ queryKey: ["overview"], queryFn: () => call(api.GET("/api/v1/overview")) });
}

export function useTask(id: number) {
  return useQuery({
    queryKey: keys.task(id),
    queryFn: () => call(api.GET("/api/v1/tasks/{id}", { params: { path: { id: String(id) } } })),
  });
}

export type InstanceAction = "stop" | "pause" | "resume" | "recover-failed" | "rerun";

export function instanceAction(id: number, action: InstanceAction): Promise<ControlResult> {
  const path = { params: { path: { id: String(id) } } };
  switch (action) {
    case "stop":
      return call(api.POST("/api/v1/instances/{id}/stop", path));
    case "pause":
      return call(api.POST("/api/v1/instances/{id}/pause", path));
    case "resume":
      return call(api.POST("/api/v1/instances/{id}/resume", path));
    case "recover-failed":
      return call(api.POST("/api/v1/instances/{id}/recover-failed", path));
    case "rerun":
      return call(api.POST("/api/v1/instances/{id}/rerun", path));
  }
}

/** Which actions an instance's state allows (the server decides; a refusal's 409 reason is shown). */
export const ACTIONS_BY_STATE: Record<InstanceAction, readonly string[]> = {
  stop: ["RUNNING_EXECUTION", "READY_PAUSE"],
  pause: ["RUNNING_EXECUTION"],
  resume: ["PAUSE", "STOP"],
  "recover-failed": ["FAILURE"],
  rerun: ["PAUSE", "STOP", "FAILURE", "SUCCESS"],
};

export function allowedActions(state: string): InstanceAction[] {
  return (Object.keys(ACTIONS_BY_STATE) as InstanceAction[]).filter((a) =>
    ACTIONS_BY_STATE[a].includes(state),
  );
}

export function useInstanceAction() {
  const client = useQueryClient();
  return useMutation({
    mutationFn: ({ id, action }: { id: number; action: InstanceAction }) => instanceAction(id, action),
    onSettled: (_data, _error, { id }) => {
      void client.invalidateQueries({ queryKey: keys.instance(id) });
      void client.invalidateQueries({ queryKey: ["instances"] });
    },
  });
}

export type WorkflowAction = "online" | "offline" | "start";

export function workflowAction(code: number, action: WorkflowAction): Promise<unknown> {
  const path = { params: { path: { code: String(code) } } };
  switch (action) {
    case "online":
      return call(api.POST("/api/v1/workflows/{code}/online", path));
    case "offline":
      return call(api.POST("/api/v1/workflows/{code}/offline", path));
    case "start":
      return call(api.POST("/api/v1/workflows/{code}/start", { ...path, body: {} }));
  }
}

/** Task types and their parameter schemas (the editor's forms); they change only with a server upgrade. */
export function useTaskTypes() {
  return useQuery({
    queryKey: ["task-types"],
    staleTime: Infinity,
    queryFn: () => call(api.GET("/api/v1/task-types")),
  });
}

/** The data sources the caller may use (secrets masked), e.g. for a SQL task's choice of one. */
export function useDataSources(enabled = true) {
  return useQuery({
    queryKey: ["datasources"],
    enabled,
    queryFn: () => call(api.GET("/api/v1/datasources", { params: { query: { size: 500 } } })),
  });
}

/** A folder of a project's resource center: its sub-folders and files, the project's usage and limits. */
export function useResourceFolder(project: string, folder: string) {
  return useQuery({
    queryKey: ["resources", project, "folder", folder],
    enabled: project !== "",
    queryFn: () =>
      call(
        api.GET("/api/v1/projects/{name}/resources", {
          params: { path: { name: project }, query: { folder } },
        }),
      ),
  });
}

/** A file's versions (newest first) and the workflow versions that use it. */
export function useResourceDetail(project: string, path: string | null) {
  const enabled = project !== "" && path !== null;
  const query = { path: path ?? "" };
  const versions = useQuery({
    queryKey: ["resources", project, "versions", path],
    enabled,
    queryFn: () =>
      call(
        api.GET("/api/v1/projects/{name}/resources/versions", { params: { path: { name: project }, query } }),
      ),
  });
  const references = useQuery({
    queryKey: ["resources", project, "references", path],
    enabled,
    queryFn: () =>
      call(
        api.GET("/api/v1/projects/{name}/resources/references", {
          params: { path: { name: project }, query },
        }),
      ),
  });
  return { versions, references };
}

/** The first ``lines`` lines of a task attempt's log (its header: the rendered script, engine/worker/rendered.py). */
export function useLogHead(taskId: number | null | undefined, lines: number, enabled = true) {
  return useQuery({
    queryKey: ["log-head", taskId, lines],
    enabled: enabled && taskId !== null && taskId !== undefined,
    staleTime: Infinity,
    retry: false,
    queryFn: () =>
      call(
        api.GET("/api/v1/tasks/{id}/log", {
          params: { path: { id: String(taskId) }, query: { skip: 0, limit: lines } },
        }),
      ),
  });
}

/** Save a workflow document: a new workflow (``code`` null, created offline) or a new version of ``code``. */
export function useSaveWorkflow(code: number | null) {
  const client = useQueryClient();
  return useMutation({
    mutationFn: (doc: WorkflowDoc) =>
      code === null
        ? call(api.POST("/api/v1/workflows", { params: { query: { release: false } }, body: doc }))
        : call(api.PUT("/api/v1/workflows/{code}", { params: { path: { code: String(code) } }, body: doc })),
    onSuccess: (saved) => {
      void client.invalidateQueries({ queryKey: ["workflow", saved.code] });
      void client.invalidateQueries({ queryKey: ["workflow-versions", saved.code] });
      void client.invalidateQueries({ queryKey: ["workflows"] });
      void client.invalidateQueries({ queryKey: keys.me }); // a project it created
    },
  });
}

/** Change the caller's own password (the current one confirms it). */
export function useChangePassword() {
  return useMutation({
    mutationFn: (body: { old_password: string; new_password: string }) =>
      call(api.POST("/api/v1/me/password", { body })),
  });
}
