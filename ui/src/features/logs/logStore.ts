// Pure: a bounded window of a task's log held as pages of lines. The API serves lines by (skip, limit);
// the viewer asks only for the pages it shows, and pages far from the view are dropped, so a huge log
// never sits in the browser whole.

export const PAGE = 1000;

export class LogStore {
  private pages = new Map<number, string[]>();
  /** lines known to exist (the furthest `next` the server answered) */
  known = 0;
  /** the task finished writing: `known` is the final count */
  complete = false;

  constructor(readonly maxPages = 40) {}

  /** Lines ``skip..`` as the server answered them, with its ``next``, ``complete`` and line ``total``. */
  put(skip: number, lines: readonly string[], next: number, complete: boolean, total = 0): void {
    lines.forEach((text, i) => {
      const n = skip + i;
      const index = Math.floor(n / PAGE);
      let page = this.pages.get(index);
      if (!page) {
        page = [];
        this.pages.set(index, page);
      }
      page[n - index * PAGE] = text;
    });
    this.known = Math.max(this.known, next, skip + lines.length, total);
    if (complete && next >= this.known) this.complete = true;
  }

  line(n: number): string | undefined {
    return this.pages.get(Math.floor(n / PAGE))?.[n % PAGE];
  }

  has(index: number): boolean {
    return this.pages.has(index);
  }

  /** Ranges to fetch so that lines ``first..last`` show: from each page's first missing line to its end
   * (a reply may stop early: the server caps its size, so a page can take several requests). */
  missing(first: number, last: number): { skip: number; limit: number }[] {
    const out: { skip: number; limit: number }[] = [];
    const end = Math.min(last, this.known - 1);
    for (let index = Math.floor(first / PAGE); index <= Math.floor(end / PAGE); index += 1) {
      const page = this.pages.get(index) ?? [];
      const full = Math.min(PAGE, this.known - index * PAGE);
      let hole = 0;
      while (hole < full && page[hole] !== undefined) hole += 1;
      if (hole < full) out.push({ skip: index * PAGE + hole, limit: PAGE - hole });
    }
    return out;
  }

  /** Drop the pages farthest from ``center`` (a line number) beyond ``maxPages``. */
  evict(center: number): void {
    if (this.pages.size <= this.maxPages) return;
    const here = Math.floor(center / PAGE);
    const byDistance = [...this.pages.keys()].sort((a, b) => Math.abs(b - here) - Math.abs(a - here));
    for (const index of byDistance.slice(0, this.pages.size - this.maxPages)) this.pages.delete(index);
  }

  get heldPages(): number {
    return this.pages.size;
  }
}
