// Query and mutation hooks of the admin screens (tokens, users, tenants, task groups, grants, ...): each
// mutation invalidates the lists it changes.
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";

import { api, call } from "./client";
import type { paths } from "./generated/schema";

/** The caller's API tokens. */
export function useTokens() {
  return useQuery({
    queryKey: ["tokens"],
    queryFn: () => call(api.GET("/api/v1/tokens", { params: { query: { size: 200 } } })),
  });
}

export function useCreateToken() {
  const client = useQueryClient();
  return useMutation({
    mutationFn: (name: string) => call(api.POST("/api/v1/tokens", { body: { name } })),
    onSettled: () => client.invalidateQueries({ queryKey: ["tokens"] }),
  });
}

export function useRevokeToken() {
  const client = useQueryClient();
  return useMutation({
    mutationFn: (id: number) =>
      call(api.DELETE("/api/v1/tokens/{id}", { params: { path: { id: String(id) } } })),
    onSettled: () => client.invalidateQueries({ queryKey: ["tokens"] }),
  });
}

export function useUsers() {
  return useQuery({
    queryKey: ["users"],
    queryFn: () => call(api.GET("/api/v1/users", { params: { query: { size: 200 } } })),
  });
}

export function useCreateUser() {
  const client = useQueryClient();
  return useMutation({
    mutationFn: (body: { name: string; password: string; admin: boolean }) =>
      call(api.POST("/api/v1/users", { body })),
    onSettled: () => client.invalidateQueries({ queryKey: ["users"] }),
  });
}

/** A user's password, or enabled / disabled. */
export function useUpdateUser() {
  const client = useQueryClient();
  return useMutation({
    mutationFn: ({ name, ...body }: { name: string; password?: string; enabled?: boolean }) =>
      call(api.PUT("/api/v1/users/{name}", { params: { path: { name } }, body })),
    onSettled: () => client.invalidateQueries({ queryKey: ["users"] }),
  });
}

/** The projects the caller sees (the admin screens' choices of a project). */
export function useProjects() {
  return useQuery({
    queryKey: ["projects"],
    queryFn: () => call(api.GET("/api/v1/projects", { params: { query: { size: 200 } } })),
  });
}

export type GrantedResource = "datasource" | "environment" | "tenant";

/** The grants of every resource of ``kind`` (admins); cached under ``[kind, "grants"]`` (tenants: "tenants"). */
function grantsKey(kind: GrantedResource) {
  return [kind === "tenant" ? "tenants" : kind, "grants"] as const;
}

export function useResourceGrantList(kind: GrantedResource) {
  return useQuery({
    queryKey: grantsKey(kind),
    queryFn: () => call(api.GET("/api/v1/grants", { params: { query: { resource_type: kind, size: 500 } } })),
  });
}

/** Grant a resource of ``kind`` to a project or a user. */
export function useGrantResource(kind: GrantedResource) {
  const client = useQueryClient();
  return useMutation({
    mutationFn: ({ resource, to }: { resource: string; to: { project: string } | { user: string } }) =>
      call(api.POST("/api/v1/grants", { body: { resource_type: kind, resource, ...to } })),
    onSettled: () => client.invalidateQueries({ queryKey: grantsKey(kind) }),
  });
}

export function useRevokeGrant(kind: GrantedResource) {
  const client = useQueryClient();
  return useMutation({
    mutationFn: (id: number) =>
      call(api.DELETE("/api/v1/grants/{id}", { params: { path: { id: String(id) } } })),
    onSettled: () => client.invalidateQueries({ queryKey: grantsKey(kind) }),
  });
}

export function useTenants() {
  return useQuery({
    queryKey: ["tenants", "list"],
    queryFn: () => call(api.GET("/api/v1/tenants", { params: { query: { size: 500 } } })),
  });
}

export function useCreateTenant() {
  const client = useQueryClient();
  return useMutation({
    mutationFn: (body: { name: string; description?: string }) => call(api.POST("/api/v1/tenants", { body })),
    onSettled: () => client.invalidateQueries({ queryKey: ["tenants"] }),
  });
}

export function useDeleteTenant() {
  const client = useQueryClient();
  return useMutation({
    mutationFn: (name: string) => call(api.DELETE("/api/v1/tenants/{name}", { params: { path: { name } } })),
    onSettled: () => client.invalidateQueries({ queryKey: ["tenants"] }),
  });
}

/** A project's grants (READ / EXECUTE / WRITE per user). */
export function useProjectGrants(project: string) {
  return useQuery({
    queryKey: ["grants", project],
    enabled: project !== "",
    queryFn: () => call(api.GET("/api/v1/projects/{name}/grants", { params: { path: { name: project } } })),
  });
}

export function useSetProjectGrant(project: string) {
  const client = useQueryClient();
  return useMutation({
    mutationFn: ({ user, perms }: { user: string; perms: ("READ" | "EXECUTE" | "WRITE")[] }) =>
      call(
        api.PUT("/api/v1/projects/{name}/grants/{user}", {
          params: { path: { name: project, user } },
          body: { perms },
        }),
      ),
    onSettled: () => client.invalidateQueries({ queryKey: ["grants", project] }),
  });
}

export function useRevokeProjectGrant(project: string) {
  const client = useQueryClient();
  return useMutation({
    mutationFn: (user: string) =>
      call(
        api.DELETE("/api/v1/projects/{name}/grants/{user}", { params: { path: { name: project, user } } }),
      ),
    onSettled: () => client.invalidateQueries({ queryKey: ["grants", project] }),
  });
}

/** Task groups with their slots in use and queue length (polled: they change as tasks run). */
export function useTaskGroups() {
  return useQuery({
    queryKey: ["task-groups"],
    queryFn: () => call(api.GET("/api/v1/task-groups", { params: { query: { size: 200 } } })),
    refetchInterval: 5_000,
  });
}

/** A task group's queue, each waiting task with its position. */
export function useTaskGroupQueue(id: number) {
  return useQuery({
    queryKey: ["task-groups", "queue", id],
    queryFn: () =>
      call(
        api.GET("/api/v1/task-groups/{id}/queue", {
          params: { path: { id: String(id) }, query: { size: 200 } },
        }),
      ),
    refetchInterval: 5_000,
  });
}

export function useCreateTaskGroup() {
  const client = useQueryClient();
  return useMutation({
    mutationFn: (body: { name: string; size: number }) => call(api.POST("/api/v1/task-groups", { body })),
    onSettled: () => client.invalidateQueries({ queryKey: ["task-groups"] }),
  });
}

export function useResizeTaskGroup(id: number) {
  const client = useQueryClient();
  return useMutation({
    mutationFn: (size: number) =>
      call(api.PATCH("/api/v1/task-groups/{id}", { params: { path: { id: String(id) } }, body: { size } })),
    onSettled: () => client.invalidateQueries({ queryKey: ["task-groups"] }),
  });
}

/** Start a waiting task now (it takes its slots over the group's size). */
export function useForceStart() {
  const client = useQueryClient();
  return useMutation({
    mutationFn: (task: number) =>
      call(
        api.POST("/api/v1/task-groups/queue/{task_instance_id}/force-start", {
          params: { path: { task_instance_id: String(task) } },
        }),
      ),
    onSettled: () => client.invalidateQueries({ queryKey: ["task-groups"] }),
  });
}

/** The alert groups the caller sees (the admin screen, the alert history's filter, the start dialog). */
export function useAlertGroups() {
  return useQuery({
    queryKey: ["alert-groups"],
    queryFn: () => call(api.GET("/api/v1/alert-groups", { params: { query: { size: 200 } } })),
  });
}

/** Alert channel types and their parameter schemas; they change only with a server upgrade. */
export function useAlertTypes() {
  return useQuery({
    queryKey: ["alert-types"],
    queryFn: async () => (await call(api.GET("/api/v1/alert-types"))).items,
    staleTime: Infinity,
  });
}

type AlertGroupBody = NonNullable<
  paths["/api/v1/alert-groups"]["post"]["requestBody"]
>["content"]["application/json"];

/** Create an alert group (``id`` undefined) or change one. */
export function useSaveAlertGroup(id: number | undefined) {
  const client = useQueryClient();
  return useMutation({
    mutationFn: (body: AlertGroupBody) =>
      id === undefined
        ? call(api.POST("/api/v1/alert-groups", { body }))
        : call(api.PATCH("/api/v1/alert-groups/{id}", { params: { path: { id: String(id) } }, body })),
    onSuccess: () => client.invalidateQueries({ queryKey: ["alert-groups"] }),
  });
}

export function useDeleteAlertGroup() {
  const client = useQueryClient();
  return useMutation({
    mutationFn: (id: number) =>
      call(api.DELETE("/api/v1/alert-groups/{id}", { params: { path: { id: String(id) } } })),
    onSettled: () => client.invalidateQueries({ queryKey: ["alert-groups"] }),
  });
}

/** Send a test alert through each of a group's senders: each sender's outcome. */
export function useTestAlertGroup() {
  return useMutation({
    mutationFn: (id: number) =>
      call(api.POST("/api/v1/alert-groups/{id}/test", { params: { path: { id: String(id) } } })),
  });
}

/** The worker groups managed in the cluster; ``poll``: refreshed every 10 s (the admin screen). */
export function useWorkerGroups(poll = false) {
  return useQuery({
    queryKey: ["worker-groups"],
    queryFn: () => call(api.GET("/api/v1/worker-groups", { params: { query: { size: 500 } } })),
    refetchInterval: poll ? 10_000 : false,
  });
}

/** Create a worker group (``stored`` undefined) or change the one named ``stored``. */
export function useSaveWorkerGroup(stored: string | undefined) {
  const client = useQueryClient();
  return useMutation({
    mutationFn: (body: { name: string; addresses: string[]; description?: string }) =>
      stored === undefined
        ? call(api.POST("/api/v1/worker-groups", { body }))
        : call(
            api.PATCH("/api/v1/worker-groups/{name}", {
              params: { path: { name: stored } },
              body: { addresses: body.addresses, description: body.description },
            }),
          ),
    onSuccess: () => client.invalidateQueries({ queryKey: ["worker-groups"] }),
  });
}

export function useDeleteWorkerGroup() {
  const client = useQueryClient();
  return useMutation({
    mutationFn: (name: string) =>
      call(api.DELETE("/api/v1/worker-groups/{name}", { params: { path: { name } } })),
    onSettled: () => client.invalidateQueries({ queryKey: ["worker-groups"] }),
  });
}
