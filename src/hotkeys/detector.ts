import { SLOT_COUNT, type Topology } from '../cluster/topology.js';
import { SpaceSaving } from './space-saving.js';

export interface DetectionOptions {
  enabled: boolean;
  /** Fraction of keyed requests looked at, (0, 1]. */
  sampleRate: number;
  windowMs: number;
  /** Keys reported per window. */
  topK: number;
}

export interface HotKeyEntry {
  key: string;
  slot: number;
  node: string;
  /** Estimated requests per second for this key over the window. */
  requestsPerSecond: number;
  /** Estimated share of all keyed requests in the window, 0..1. */
  share: number;
  /** Upper bound of the estimate's overcount, as a share (Space-Saving error). */
  shareError: number;
  /** A fleet's merged report: this instance's own requests per second for the key (fleet-hot-keys.ts). */
  localRequestsPerSecond?: number;
}

export interface NodeShare {
  node: string;
  requestsPerSecond: number;
  share: number;
  /** A fleet's merged report: this instance's own requests per second to the node. */
  localRequestsPerSecond?: number;
}

export interface WindowReport {
  startedAt: number;
  endedAt: number;
  /** Requests looked at (sampled). */
  sampled: number;
  /** Estimated keyed requests in the window (sampled / sampleRate). */
  estimatedRequests: number;
  requestsPerSecond: number;
  topKeys: HotKeyEntry[];
  nodes: NodeShare[];
  /** A wider top list (SUMMARY_FACTOR × topK) that a fleet's members share to merge (fleet-hot-keys.ts). */
  summary?: HotKeyEntry[];
  /** A fleet's merged report: how many members' windows it sums. */
  members?: number;
}

/** A fleet member shares this many times topK of its top keys, so the merged ranking is sound. */
export const SUMMARY_FACTOR = 4;

/**
 * Finds hot keys from the traffic: a sampled stream of (key, slot) goes into a Space-Saving
 * summary and a per-slot counter; every `windowMs` the window closes into a report (top keys
 * with rate and share, each node's share) and the counters restart. Reports are rates over one
 * window, not decaying counters.
 *
 * Cost on the hot path: `shouldSample()` is one decrement and compare; only sampled requests
 * (1 in 1/sampleRate, at random spacing so periodic traffic is not aliased) build a key string.
 */
export class HotKeyDetector {
  private readonly summary: SpaceSaving;
  private readonly slotCounts = new Uint32Array(SLOT_COUNT);
  /** Slot of each monitored key (for the report's node column). */
  private readonly keySlots = new Map<string, number>();
  private countdown = 1;
  private readonly meanGap: number;
  private windowStart = Date.now();
  private last: WindowReport | null = null;

  constructor(readonly options: DetectionOptions) {
    this.meanGap = Math.max(1, Math.round(1 / options.sampleRate));
    // Monitor more items than reported: Space-Saving's estimates are exact for the top items
    // once capacity comfortably exceeds the number of heavy hitters.
    this.summary = new SpaceSaving(Math.max(64, options.topK * 8));
    this.countdown = this.nextGap();
  }

  /** Hot path: true for the requests to sample. */
  shouldSample(): boolean {
    if (--this.countdown > 0) return false;
    this.countdown = this.nextGap();
    return true;
  }

  /** Records one sampled request on `key` (a latin1 string of the key bytes) in `slot`. */
  record(key: string, slot: number): void {
    this.summary.offer(key);
    this.slotCounts[slot]!++;
    if (!this.keySlots.has(key)) {
      if (this.keySlots.size > this.summary.capacity * 4) this.pruneKeySlots();
      this.keySlots.set(key, slot);
    }
  }

  /** The last completed window, or null before the first one closed. */
  get lastWindow(): WindowReport | null {
    return this.last;
  }

  /** The window in progress (so far). */
  current(topology: Topology | null, now = Date.now()): WindowReport {
    return this.report(topology, this.windowStart, now);
  }

  /** Closes the window: returns its report (with a `summary` to share) and starts the next one. */
  rotate(topology: Topology | null, now = Date.now()): WindowReport {
    const report = this.report(topology, this.windowStart, now, this.options.topK * SUMMARY_FACTOR);
    this.last = report;
    this.summary.reset();
    this.slotCounts.fill(0);
    this.keySlots.clear();
    this.windowStart = now;
    return report;
  }

  private report(topology: Topology | null, startedAt: number, endedAt: number, summaryLimit = 0): WindowReport {
    const seconds = Math.max(0.001, (endedAt - startedAt) / 1000);
    const sampled = this.summary.total;
    const scale = 1 / this.options.sampleRate;
    const nodeOf = (slot: number) => topology?.primaryForSlot(slot)?.address ?? '';
    const entries = this.summary.top(Math.max(this.options.topK, summaryLimit)).map((e) => {
      const slot = this.keySlots.get(e.item) ?? -1;
      return {
        key: displayKey(e.item),
        slot,
        node: slot >= 0 ? nodeOf(slot) : '',
        requestsPerSecond: (e.count * scale) / seconds,
        share: sampled > 0 ? e.count / sampled : 0,
        shareError: sampled > 0 ? e.error / sampled : 0,
      };
    });
    const topKeys = entries.slice(0, this.options.topK);
    const byNode = new Map<string, number>();
    if (topology !== null) for (const n of topology.primaries()) byNode.set(n.address, 0);
    for (let slot = 0; slot < SLOT_COUNT; slot++) {
      const c = this.slotCounts[slot]!;
      if (c === 0) continue;
      const node = nodeOf(slot);
      byNode.set(node, (byNode.get(node) ?? 0) + c);
    }
    const nodes = [...byNode]
      .map(([node, c]) => ({ node, requestsPerSecond: (c * scale) / seconds, share: sampled > 0 ? c / sampled : 0 }))
      .sort((a, b) => (a.node < b.node ? -1 : 1));
    return {
      startedAt, endedAt, sampled,
      estimatedRequests: sampled * scale,
      requestsPerSecond: (sampled * scale) / seconds,
      topKeys, nodes,
      ...(summaryLimit > 0 ? { summary: entries } : {}),
    };
  }

  private nextGap(): number {
    // Uniform on [1, 2*mean-1]: mean `meanGap`, never periodic.
    const m = this.meanGap;
    return m === 1 ? 1 : 1 + Math.floor(Math.random() * (2 * m - 1));
  }

  private pruneKeySlots(): void {
    const keep = new Set(this.summary.top(this.summary.capacity).map((e) => e.item));
    for (const k of this.keySlots.keys()) if (!keep.has(k)) this.keySlots.delete(k);
  }
}

/** A key (latin1 string of its bytes) as text: UTF-8 when it is valid UTF-8, else escaped. */
export function displayKey(latin1: string): string {
  const bytes = Buffer.from(latin1, 'latin1');
  const text = bytes.toString('utf8');
  if (Buffer.byteLength(text) === bytes.length && !text.includes('\uFFFD')) return text;
  let out = '';
  for (const b of bytes) out += b >= 0x20 && b < 0x7f && b !== 0x5c ? String.fromCharCode(b) : `\\x${b.toString(16).padStart(2, '0')}`;
  return out;
}
