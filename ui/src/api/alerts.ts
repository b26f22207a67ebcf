// Query and mutation hooks of the alert history: a resend invalidates the alert lists.
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";

import { api, call } from "./client";
import type { paths } from "./generated/schema";

type AlertFilters = NonNullable<paths["/api/v1/alerts"]["get"]["parameters"]["query"]>;

export function useAlerts(query: AlertFilters) {
  return useQuery({
    queryKey: ["alerts", query],
    queryFn: () => call(api.GET("/api/v1/alerts", { params: { query } })),
  });
}

export function useResendAlert() {
  const client = useQueryClient();
  return useMutation({
    mutationFn: (id: number) =>
      call(api.POST("/api/v1/alerts/{id}/resend", { params: { path: { id: String(id) } } })),
    onSettled: () => client.invalidateQueries({ queryKey: ["alerts"] }),
  });
}
