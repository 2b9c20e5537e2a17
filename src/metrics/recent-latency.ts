import { LatencyHistogram } from './latency-histogram.js';

/** One slot per second, a minute and a bit of them. */
const SLOTS = 64;
export const SLOT_MS = 1_000;

/**
 * The clients' data requests (receive → reply written: keyed, multi-key and script commands) in
 * one-second slots over the last minute: what a live migration's pace reads
 * (src/migration/latency-guard.ts) — their p99 before START, then every second's during the copy.
 *
 *   slots[i]  : the requests of the second that began at startedAt[i] (slots[current] is filling)
 *   rotate()  : every second (LatencyWindows' timer); the oldest slot is cleared and becomes the current one
 */
export class RecentLatency {
  private readonly slots = Array.from({ length: SLOTS }, () => new LatencyHistogram());
  private readonly startedAt = new Float64Array(SLOTS).fill(Number.NEGATIVE_INFINITY);
  private current = 0;

  constructor(private readonly now: () => number = Date.now) {
    this.startedAt[0] = now();
  }

  recordMs(ms: number): void {
    this.slots[this.current]!.recordMs(ms);
  }

  /** Starts the next slot (LatencyWindows' timer, every second; tests call it themselves). */
  rotate(): void {
    this.current = (this.current + 1) % SLOTS;
    this.slots[this.current]!.reset();
    this.startedAt[this.current] = this.now();
  }

  /** The whole slots that began at or after `fromMs` (the one filling now is left out: it is not whole). */
  secondsSince(fromMs: number): LatencyHistogram[] {
    const out: LatencyHistogram[] = [];
    for (let i = 0; i < SLOTS; i++) {
      if (i !== this.current && this.startedAt[i]! >= fromMs) out.push(this.slots[i]!);
    }
    return out;
  }

  /** Their requests added up. */
  since(fromMs: number): LatencyHistogram {
    const sum = new LatencyHistogram();
    for (const h of this.secondsSince(fromMs)) sum.add(h);
    return sum;
  }
}
