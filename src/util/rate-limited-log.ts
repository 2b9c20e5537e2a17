import type { Logger } from 'pino';

export type EventLevel = 'fatal' | 'error' | 'warn' | 'info' | 'debug';

/**
 * Operator-facing event lines, rate limited per key (event kind + node): at most one line per
 * `intervalMs` for a key; the lines dropped meanwhile are counted and reported as `suppressed`
 * on the next line of that key. So a storm (a node flapping, every request shed) costs one line
 * per second per node and kind, and the count says how big it was.
 *
 * Every line carries `event: <kind>` so it can be filtered (`jq 'select(.event=="node_lost")'`).
 */
export class RateLimitedLog {
  private readonly last = new Map<string, { at: number; suppressed: number }>();

  constructor(
    private readonly log: Logger,
    readonly intervalMs = 1000,
    private readonly now: () => number = Date.now,
  ) {}

  /** Logs unless this kind+key logged less than intervalMs ago; true when a line was written. */
  emit(level: EventLevel, kind: string, key: string, fields: Record<string, unknown>, message: string): boolean {
    const id = `${kind}\u0000${key}`;
    const at = this.now();
    const entry = this.last.get(id);
    if (entry !== undefined && at - entry.at < this.intervalMs) {
      entry.suppressed++;
      return false;
    }
    const suppressed = entry?.suppressed ?? 0;
    if (entry === undefined) {
      if (this.last.size >= 10_000) this.prune(at);
      this.last.set(id, { at, suppressed: 0 });
    } else {
      entry.at = at;
      entry.suppressed = 0;
    }
    this.log[level]({ event: kind, ...fields, ...(suppressed > 0 ? { suppressed } : {}) }, message);
    return true;
  }

  /** Forgets keys that are quiet (their suppressed counts, if any, are dropped). */
  private prune(at: number): void {
    for (const [id, e] of this.last) if (at - e.at >= this.intervalMs) this.last.delete(id);
  }
}
