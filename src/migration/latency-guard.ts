import type { RecentLatency } from '../metrics/recent-latency.js';

/** The clients' p99 is read over the whole seconds of this span (about 12,000 requests at 4,000/s). */
export const GUARD_WINDOW_MS = 3_000;
/** A p99 over fewer requests than this says nothing: the pace stays where it is (and no baseline: no guard). */
export const GUARD_MIN_CALLS = 500;
/** The baseline: the clients' usual p99 over the minute before START (the median of its seconds'). */
export const BASELINE_MS = 60_000;
/** A second with fewer requests has no p99 of its own in the baseline. */
const MIN_CALLS_PER_SECOND = 20;
/** The share of maxKeysPerSecond the scan starts at, and the least it falls to. */
export const START_SHARE = 0.1;
export const MIN_SHARE = 0.01;

/** What the guard says of itself (STATUS). */
export interface GuardState {
  /** 'on', or 'no baseline' (too few requests before START, and no earlier baseline: the ceiling). */
  guard: 'on' | 'no baseline';
  /** The share of the configured pace the scan runs at now (1 without a guard). */
  share: number;
  /** The clients' p99 before START and over the last GUARD_WINDOW_MS, µs (0: not known). */
  p99BeforeUs: number;
  p99NowUs: number;
}

/**
 * Holds the scan's pace to the clients: the copy may cost them at most `maxRise` (1.2: 20%) on
 * their p99 (this process's data requests, receive → reply written: metrics/recent-latency.ts).
 * Once a second, it compares their p99 over the last GUARD_WINDOW_MS with their usual p99 in the
 * minute before START (the median of its seconds') — nothing of a copy in it: the minute begins
 * no earlier than the last migration ended — and halves the pace while it is above, or grows it
 * by a quarter while within, between MIN_SHARE and the configured maximum, starting low
 * (START_SHARE): the first seconds are the ones it knows least about.
 *
 * The writes' copies are not paced (they keep the target current), so they count against the
 * same budget: where they alone cost the clients more, the scan runs at its least (MIN_SHARE).
 * It reads what respool sees: the wait before respool reads a request (respool not scheduled on
 * cores it shares) and the client's own time are not in it (docs/migration.md, Limits).
 */
export class LatencyGuard {
  private share = START_SHARE;
  private readonly beforeUs: number;
  private nowUs = 0;
  private lastUpdate: number;

  constructor(
    private readonly recent: RecentLatency,
    private readonly maxRise: number,
    /** When the minute before START may begin: the end of this process's last migration (0: none). */
    quietSince: number,
    /** The last migration's baseline (µs; 0: none): kept when too little has run since it ended (an ABORT, then START again). */
    earlierUs: number,
    private readonly now: () => number = Date.now,
  ) {
    // The median of the seconds' p99s: one slow second before START (a pause, a process just
    // started and still compiling) does not make a baseline that the copy could hide under.
    const seconds = recent.secondsSince(Math.max(now() - BASELINE_MS, quietSince));
    const calls = seconds.reduce((n, h) => n + h.count, 0);
    const p99s = seconds.filter((h) => h.count >= MIN_CALLS_PER_SECOND).map((h) => h.percentileUs(99));
    this.beforeUs = calls >= GUARD_MIN_CALLS && p99s.length > 0 ? median(p99s) : earlierUs;
    if (this.beforeUs === 0) this.share = 1;
    this.lastUpdate = now();
  }

  /** The share of the configured pace to run at now (read per key; re-decided once a second). */
  currentShare(): number {
    if (this.beforeUs === 0) return 1;
    const now = this.now();
    if (now - this.lastUpdate >= 1_000) {
      this.lastUpdate = now;
      this.update(now);
    }
    return this.share;
  }

  state(): GuardState {
    return { guard: this.beforeUs === 0 ? 'no baseline' : 'on', share: this.share, p99BeforeUs: this.beforeUs, p99NowUs: this.nowUs };
  }

  private update(now: number): void {
    const recent = this.recent.since(now - GUARD_WINDOW_MS);
    if (recent.count < GUARD_MIN_CALLS) return;
    this.nowUs = recent.percentileUs(99);
    this.share = this.nowUs > this.beforeUs * this.maxRise ? Math.max(MIN_SHARE, this.share / 2) : Math.min(1, this.share * 1.25);
  }
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}
