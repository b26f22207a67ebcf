// Two versions of a workflow compared as YAML text, line by line (jsdiff).
import { diffLines } from "diff";
import { useState } from "react";
import { stringify } from "yaml";

import { useVersions, useWorkflowVersion } from "../../api/queries";
import { ErrorBox } from "../../components/ErrorBox";
import { Time } from "../../components/Time";
import { tVersionDiff } from "./strings";

export function VersionDiff({ code, current }: { code: number; current: number }) {
  const versions = useVersions(code);
  const [left, setLeft] = useState(Math.max(1, current - 1));
  const [right, setRight] = useState(current);
  const a = useWorkflowVersion(code, left);
  const b = useWorkflowVersion(code, right);
  const parts = a.data && b.data ? diffLines(stringify(a.data.document), stringify(b.data.document)) : [];
  const numbers = versions.data?.items.map((v) => Number(v.version)) ?? [];
  const pick = (value: number, set: (n: number) => void, label: string) => (
    <select value={value} onChange={(e) => set(Number(e.target.value))} aria-label={label}>
      {numbers.map((n) => (
        <option key={n} value={n}>
          v{n}
        </option>
      ))}
    </select>
  );
  return (
    <div>
      <h2>Versions</h2>
      <ErrorBox error={versions.error ?? a.error ?? b.error} title="Cannot load versions" />
      <ul className="versions">
        {versions.data?.items.map((v) => (
          <li key={String(v.version)}>
            v{String(v.version)} {v.current ? "(current)" : ""}{" "}
            <span className="muted">
              <Time iso={v.create_time} />
            </span>
          </li>
        ))}
      </ul>
      {numbers.length > 1 && (
        <>
          <div className="toolbar">
            Compare {pick(left, setLeft, "Older version")} with {pick(right, setRight, "Newer version")}
          </div>
          {/* focusable: a diff wider or longer than its box scrolls with the arrow keys */}
          <pre
            className="diff"
            data-testid="version-diff"
            tabIndex={0}
            role="region"
            aria-label={tVersionDiff.region(left, right)}
          >
            {parts.map((p, i) => (
              <span key={i} className={p.added ? "added" : p.removed ? "removed" : "same"}>
                {p.value
                  .replace(/\n$/, "")
                  .split("\n")
                  .map((line) => `${p.added ? "+ " : p.removed ? "- " : "  "}${line}`)
                  .join("\n") + "\n"}
              </span>
            ))}
          </pre>
        </>
      )}
    </div>
  );
}
