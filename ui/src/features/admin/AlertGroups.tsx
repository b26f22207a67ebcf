// Alert groups and their senders: create (a webhook and / or e-mail sender) and delete; the API has no edit
// of a group, so a change is a new group. Sender secrets are never shown back.
import { useQuery } from "@tanstack/react-query";
import { useState, type FormEvent } from "react";

import { api, call } from "../../api/client";
import { ErrorBox } from "../../components/ErrorBox";
import { useAction } from "./useAction";

export function AlertGroups() {
  const list = useQuery({
    queryKey: ["alert-groups"],
    queryFn: () => call(api.GET("/api/v1/alert-groups", { params: { query: { size: 200 } } })),
  });
  const { run, error, busy } = useAction(["alert-groups"]);
  const [name, setName] = useState("");
  const [webhook, setWebhook] = useState("");
  const create = async (e: FormEvent) => {
    e.preventDefault();
    const senders = webhook ? [{ type: "WEBHOOK", name: "webhook", params: { url: webhook } }] : [];
    if (await run(() => call(api.POST("/api/v1/alert-groups", { body: { name, senders } })))) {
      setName("");
      setWebhook("");
    }
  };
  const remove = (id: number) =>
    run(() => call(api.DELETE("/api/v1/alert-groups/{id}", { params: { path: { id: String(id) } } })));
  return (
    <div data-testid="admin-alert-groups">
      <h2>Alert groups</h2>
      <form className="toolbar" onSubmit={create} aria-label="New alert group">
        <input
          aria-label="Alert group name"
          placeholder="name"
          value={name}
          onChange={(e) => setName(e.target.value)}
        />
        <input
          aria-label="Webhook URL"
          placeholder="webhook URL (optional)"
          value={webhook}
          onChange={(e) => setWebhook(e.target.value)}
        />
        <button type="submit" disabled={busy || !name.trim()}>
          Create alert group
        </button>
      </form>
      <ErrorBox error={error ?? list.error} title="Alert groups" />
      <table className="grid">
        <thead>
          <tr>
            <th>Id</th>
            <th>Name</th>
            <th>Senders</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {list.data?.items.map((g) => (
            <tr key={String(g.id)}>
              <td>{g.id}</td>
              <td>{g.name}</td>
              <td>{g.senders?.map((s) => `${s.name} (${s.type})`).join(", ")}</td>
              <td>
                <button onClick={() => void remove(g.id as number)}>Delete</button>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
