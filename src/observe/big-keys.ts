import type { Gauge } from 'prom-client';
import type { Topology } from '../cluster/topology.js';
import type { Metrics } from '../metrics/metrics.js';
import { displayKey } from '../hotkeys/detector.js';

/** One big key as RESPOOL BIGKEYS and /bigkeys show it. */
export interface BigKeyEntry {
  key: string;
  /** Reply bytes of the last sampled read (what the value costs to send now), and the largest seen. */
  bytes: number;
  maxBytes: number;
  /** Sampled requests that measured it. */
  samples: number;
  /** The command last measured (get, hgetall, …), its slot and that slot's primary. */
  command: string;
  slot: number;
  node: string;
}

interface Tracked {
  bytes: number;
  maxBytes: number;
  samples: number;
  command: string;
  slot: number;
}

/** Metric series at most (as hot keys': key names are label values only when turned on). */
const MAX_METRIC_RANKS = 20;

/**
 * The largest keys by reply size, from the hot-key sampler's sample (hotkeys/hot-keys.ts route():
 * a sampled keyed request's reply length is measured when its reply-queue entry is filled). No
 * extra sampling and nothing on unsampled requests.
 *
 *   tracked : at most `topK * 8` keys (at least 64); a new key enters only by pushing out a
 *             smaller one, so memory is bounded whatever the key space
 *   report  : the `topK` largest by their last measured size
 *
 * respool_bigkeys_top_key_bytes{rank,key}: at most 20 ranks, the key label empty unless
 * hotKeys.detection.keyNamesInMetrics (names cut at 100 characters).
 */
export class BigKeys {
  private readonly tracked = new Map<string, Tracked>();
  private readonly capacity: number;

  constructor(
    readonly topK: number,
    private readonly topology: () => Topology | null,
    metrics?: Metrics,
    keyNamesInMetrics = false,
  ) {
    this.capacity = Math.max(64, topK * 8);
    if (metrics !== undefined) {
      const gauge = metrics.raw.bigkeys_top_key_bytes as Gauge<string>;
      (gauge as unknown as { collect: () => void }).collect = () => {
        gauge.reset();
        this.top(Math.min(this.topK, MAX_METRIC_RANKS)).forEach((k, i) => {
          const key = !keyNamesInMetrics ? '' : k.key.length > 100 ? `${k.key.slice(0, 100)}…` : k.key;
          gauge.labels(String(i + 1), key).set(k.bytes);
        });
      };
    }
  }

  /** A sampled request's reply: `key` (latin1 of its bytes), its reply size. */
  record(key: string, slot: number, command: string, bytes: number): void {
    const known = this.tracked.get(key);
    if (known !== undefined) {
      known.bytes = bytes;
      if (bytes > known.maxBytes) known.maxBytes = bytes;
      known.samples++;
      known.command = command;
      return;
    }
    if (this.tracked.size >= this.capacity) {
      let smallest: string | null = null;
      let least = Infinity;
      for (const [k, t] of this.tracked) {
        if (t.bytes < least) {
          least = t.bytes;
          smallest = k;
        }
      }
      if (bytes <= least) return;
      this.tracked.delete(smallest!);
    }
    this.tracked.set(key, { bytes, maxBytes: bytes, samples: 1, command, slot });
  }

  /** The `count` largest keys by last measured reply size. */
  top(count = this.topK): BigKeyEntry[] {
    const topology = this.topology();
    return [...this.tracked]
      .sort(([, a], [, b]) => b.bytes - a.bytes)
      .slice(0, count)
      .map(([key, t]) => ({
        key: displayKey(key), bytes: t.bytes, maxBytes: t.maxBytes, samples: t.samples, command: t.command, slot: t.slot,
        node: topology?.primaryForSlot(t.slot)?.address ?? '',
      }));
  }

  reset(): void {
    this.tracked.clear();
  }
}
