import { useCluster } from "../api/queries";
import { ErrorBox, Loading } from "../components/ErrorBox";
import { tTitle } from "../components/strings";
import { formatNumber } from "../i18n";
import { tCluster as t } from "./detailStrings";
import { useTitle } from "../components/title";

type Node = { address: string; group: string | null; status: string; heartbeat: Record<string, unknown> };

function num(hb: Record<string, unknown>, key: string, digits = 1, factor = 1): string {
  const v = hb[key];
  return typeof v === "number" ? formatNumber(v * factor, digits) : "—";
}

function Nodes({ title, nodes }: { title: string; nodes: Node[] }) {
  return (
    <>
      <h2>{t.count(title, nodes.length)}</h2>
      <table className="grid">
        <thead>
          <tr>
            <th>{t.address}</th>
            <th>{t.group}</th>
            <th>{t.status}</th>
            <th>{t.cpu}</th>
            <th>{t.memory}</th>
            <th>{t.load}</th>
          </tr>
        </thead>
        <tbody>
          {nodes.map((n) => (
            <tr key={n.address}>
              <td>{n.address}</td>
              <td>{n.group ?? "—"}</td>
              <td>
                <span className={`state state-${n.status === "NORMAL" ? "ok" : "bad"}`}>
                  <span aria-hidden="true">{n.status === "NORMAL" ? "✓" : "!"}</span>{" "}
                  {t.statuses[n.status] ?? n.status}
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
                {t.none}
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
      <h1>{t.title}</h1>
      <ErrorBox error={query.error} title={t.cannotRead} />
      {query.isPending && <Loading what={t.what} />}
      {query.data && (
        <>
          <Nodes title={t.masters} nodes={query.data.masters as Node[]} />
          <Nodes title={t.workers} nodes={query.data.workers as Node[]} />
        </>
      )}
    </section>
  );
}
