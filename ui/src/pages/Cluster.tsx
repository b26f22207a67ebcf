import { useCluster } from "../api/queries";
import { ErrorBox, Loading } from "../components/ErrorBox";
import { tTitle } from "../components/strings";
import { useTitle } from "../components/title";

type Node = { address: string; group: string | null; status: string; heartbeat: Record<string, unknown> };

function num(hb: Record<string, unknown>, key: string, digits = 1, factor = 1): string {
  const v = hb[key];
  return typeof v === "number" ? (v * factor).toFixed(digits) : "—";
}

function Nodes({ title, nodes }: { title: string; nodes: Node[] }) {
  return (
    <>
      <h2>
        {title} ({nodes.length})
      </h2>
      <table className="grid">
        <thead>
          <tr>
            <th>Address</th>
            <th>Group</th>
            <th>Status</th>
            <th>CPU %</th>
            <th>Memory %</th>
            <th>Load</th>
          </tr>
        </thead>
        <tbody>
          {nodes.map((n) => (
            <tr key={n.address}>
              <td>{n.address}</td>
              <td>{n.group ?? "—"}</td>
              <td>
                <span className={`state state-${n.status === "NORMAL" ? "ok" : "bad"}`}>
                  <span aria-hidden="true">{n.status === "NORMAL" ? "✓" : "!"}</span> {n.status.toLowerCase()}
                </span>
              </td>
              <td>{num(n.heartbeat, "cpu_usage", 0, 100)}</td>
              <td>{num(n.heartbeat, "memory_usage", 0, 100)}</td>
              <td>{num(n.heartbeat, "load_average", 2)}</td>
            </tr>
          ))}
          {nodes.length === 0 && (
            <tr>
              <td colSpan={6} className="muted">
                none registered
              </td>
            </tr>
          )}
        </tbody>
      </table>
    </>
  );
}

export function ClusterPage() {
  useTitle(tTitle.cluster);
  const query = useCluster();
  return (
    <section>
      <h1>Cluster</h1>
      <ErrorBox error={query.error} title="Cannot read the cluster" />
      {query.isPending && <Loading what="cluster" />}
      {query.data && (
        <>
          <Nodes title="Masters" nodes={query.data.masters as Node[]} />
          <Nodes title="Workers" nodes={query.data.workers as Node[]} />
        </>
      )}
    </section>
  );
}
