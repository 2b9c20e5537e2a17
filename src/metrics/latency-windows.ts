import { LatencyHistogram } from './latency-histogram.js';
import { RecentLatency, SLOT_MS as RECENT_SLOT_MS } from './recent-latency.js';

/** The last minute: six slots of ten seconds (the oldest is cleared as the newest starts). */
export const WINDOW_SLOTS = 6;
export const SLOT_MS = 10_000;

/** A latency histogram over the last minute (50–60 s of it): a ring of slots, rotated by LatencyWindows. */
export class WindowedHistogram {
  private readonly slots: LatencyHistogram[] = Array.from({ length: WINDOW_SLOTS }, () => new LatencyHistogram());
  private current = 0;

  recordMs(ms: number): void {
    this.slots[this.current]!.recordMs(ms);
  }

  rotate(): void {
    this.current = (this.current + 1) % WINDOW_SLOTS;
    this.slots[this.current]!.reset();
  }

  /** Every slot added up. */
  merged(): LatencyHistogram {
    const sum = new LatencyHistogram();
    for (const s of this.slots) sum.add(s);
    return sum;
  }
}

/** p50 / p99 / p99.9 (µs) and the count of one window. */
export interface LatencySummary {
  name: string;
  calls: number;
  /** Requests per second over the window's span (at least one slot). */
  perSecond: number;
  p50Us: number;
  p99Us: number;
  p999Us: number;
}

export function summarize(name: string, h: LatencyHistogram, seconds: number): LatencySummary {
  return { name, calls: h.count, perSecond: h.count / seconds, p50Us: h.percentileUs(50), p99Us: h.percentileUs(99), p999Us: h.percentileUs(99.9) };
}

/**
 * Last-minute latency per upstream node (send → reply, as respool_upstream_latency_seconds) and
 * per command family (receive → reply written, as respool_client_request_duration_seconds):
 * RESPOOL LATENCY, /latency, the status page, the *_last_minute_seconds gauges and node
 * saturation read them. One timer rotates every window; nodes that leave are forgotten.
 */
export class LatencyWindows {
  private readonly nodes = new Map<string, WindowedHistogram>();
  private readonly families = new Map<string, WindowedHistogram>();
  /** Per tenant (receive → reply written, as its clients see it: src/tenants). */
  private readonly tenants = new Map<string, WindowedHistogram>();
  /** The clients' data requests in one-second slots (a migration's pace): the same timer turns them, every second. */
  readonly recent = new RecentLatency();
  private ticks = 0;
  private timer: NodeJS.Timeout | null = null;
  /** When the current slot began, and how many slots before it hold data (at most WINDOW_SLOTS - 1). */
  private slotStartedAt = Date.now();
  private fullSlots = 0;

  node(address: string): WindowedHistogram {
    let w = this.nodes.get(address);
    if (w === undefined) this.nodes.set(address, (w = new WindowedHistogram()));
    return w;
  }

  family(name: string): WindowedHistogram {
    let w = this.families.get(name);
    if (w === undefined) this.families.set(name, (w = new WindowedHistogram()));
    return w;
  }

  tenant(name: string): WindowedHistogram {
    let w = this.tenants.get(name);
    if (w === undefined) this.tenants.set(name, (w = new WindowedHistogram()));
    return w;
  }

  forgetNode(address: string): void {
    this.nodes.delete(address);
  }

  start(): void {
    if (this.timer !== null) return;
    this.timer = setInterval(() => {
      this.recent.rotate();
      if (++this.ticks % (SLOT_MS / RECENT_SLOT_MS) === 0) this.rotate();
    }, RECENT_SLOT_MS);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
  }

  rotate(): void {
    this.slotStartedAt = Date.now();
    this.fullSlots = Math.min(WINDOW_SLOTS - 1, this.fullSlots + 1);
    for (const w of this.nodes.values()) w.rotate();
    for (const w of this.families.values()) w.rotate();
    for (const w of this.tenants.values()) w.rotate();
  }

  /** Seconds the windows span now (a minute once they are full; less just after start). */
  spanSeconds(now = Date.now()): number {
    return Math.max(1, (this.fullSlots * SLOT_MS + (now - this.slotStartedAt)) / 1000);
  }

  nodeSummaries(): LatencySummary[] {
    const seconds = this.spanSeconds();
    return [...this.nodes].sort(([a], [b]) => (a < b ? -1 : 1)).map(([name, w]) => summarize(name, w.merged(), seconds));
  }

  familySummaries(): LatencySummary[] {
    const seconds = this.spanSeconds();
    return [...this.families].sort(([a], [b]) => (a < b ? -1 : 1)).map(([name, w]) => summarize(name, w.merged(), seconds));
  }

  /** One node's last minute (saturation), or null if it had no traffic yet. */
  nodeSummary(address: string): LatencySummary | null {
    const w = this.nodes.get(address);
    return w === undefined ? null : summarize(address, w.merged(), this.spanSeconds());
  }
}
