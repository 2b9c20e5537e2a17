import type { Logger } from 'pino';

export type EventLevel = 'fatal' | 'error' | 'warn' | 'info' | 'debug';

/** One event line as written (the status page's "recent events"). */
export interface EventRecord {
  at: number;
  level: EventLevel;
  event: string;
  message: string;
  fields: Record<string, unknown>;
}

/** Event lines kept for GET /events, newest last. */
export const RECENT_EVENTS = 100;

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
  /** The last RECENT_EVENTS lines written (a ring: `next` is where the next one goes). */
  private readonly ring: EventRecord[] = [];
  private next = 0;

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
    const line = { ...fields, ...(suppressed > 0 ? { suppressed } : {}) };
    this.log[level]({ event: kind, ...line }, message);
    this.ring[this.next] = { at, level, event: kind, message, fields: line };
    this.next = (this.next + 1) % RECENT_EVENTS;
    return true;
  }

  /** The event lines written lately, oldest first (at most RECENT_EVENTS). */
  recent(): EventRecord[] {
    return [...this.ring.slice(this.next), ...this.ring.slice(0, this.next)];
  }

  /** Forgets keys that are quiet (their suppressed counts, if any, are dropped). */
  private prune(at: number): void {
    for (const [id, e] of this.last) if (at - e.at >= this.intervalMs) this.last.delete(id);
  }
}
