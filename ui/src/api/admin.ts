// Query and mutation hooks of the admin screens (tokens, users, tenants, task groups, grants, ...): each
// mutation invalidates the lists it changes.
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";

import { api, call } from "./client";

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
