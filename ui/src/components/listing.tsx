// What the list pages share: URL search parameters as filters, a selection of rows, the pager.
import { useState } from "react";
import { useSearchParams } from "react-router";

import { tCommon } from "./strings";

/** Filters kept in the URL (a filtered list is a link); changing one returns to page 1. */
export function useUrlFilters() {
  const [params, setParams] = useSearchParams();
  const set = (name: string, value: string) => {
    const next = new URLSearchParams(params);
    if (value) next.set(name, value);
    else next.delete(name);
    if (name !== "page") next.delete("page");
    setParams(next, { replace: name !== "page" });
  };
  /** drop every one of ``names`` (and the page) at once */
  const clear = (names: string[]) => {
    const next = new URLSearchParams(params);
    for (const name of [...names, "page"]) next.delete(name);
    setParams(next, { replace: true });
  };
  return { params, set, clear, page: Number(params.get("page") ?? "1") || 1 };
}

export function useSelection() {
  const [selected, setSelected] = useState<Set<number>>(new Set());
  const toggle = (id: number) => {
    const next = new Set(selected);
    if (next.has(id)) next.delete(id);
    else next.add(id);
    setSelected(next);
  };
  return {
    selected,
    toggle,
    setAll: (ids: number[]) => setSelected(new Set(ids)),
    clear: () => setSelected(new Set()),
  };
}

export function SelectAll({ ids, selection }: { ids: number[]; selection: ReturnType<typeof useSelection> }) {
  return (
    <input
      type="checkbox"
      aria-label={tCommon.selectAll}
      checked={ids.length > 0 && ids.every((id) => selection.selected.has(id))}
      onChange={(e) => (e.target.checked ? selection.setAll(ids) : selection.clear())}
    />
  );
}

export function Pager({
  page,
  total,
  size,
  noun,
  onPage,
  capped = false,
}: {
  page: number;
  total: number;
  size: number;
  noun: string;
  onPage: (page: number) => void;
  /** the server stopped counting at ``total``: there are more */
  capped?: boolean;
}) {
  const pages = Math.max(1, Math.ceil(total / size));
  return (
    <nav className="pager" aria-label={tCommon.pages}>
      <button disabled={page <= 1} onClick={() => onPage(page - 1)}>
        {tCommon.previous}
      </button>
      <span>
        {tCommon.pageOf(page, `${pages}${capped ? "+" : ""}`, `${total}${capped ? "+" : ""}`, noun)}
      </span>
      <button disabled={page >= pages} onClick={() => onPage(page + 1)}>
        {tCommon.next}
      </button>
    </nav>
  );
}
