/**
 * At most `attempts` connection attempts to one node in any `windowMs` (a sliding window).
 *
 * Valkey itself (PR #2154) stopped re-dialing dead peers every 100 ms and spreads ~10 attempts
 * across cluster-node-timeout; respool applies the same discipline to a node it cannot reach,
 * however many links, pools and clients point at it: there is one DialBudget per node address
 * (see NodeHealth), and every dial to that address asks it first.
 *
 *   stamps   : ring buffer of the last `attempts` attempt times, oldest at `head`
 *   invariant: an attempt is allowed when fewer than `attempts` stamps lie within the window,
 *              i.e. when the oldest of the last `attempts` stamps is older than windowMs.
 */
export class DialBudget {
  private readonly stamps: Float64Array;
  private head = 0;
  private count = 0;

  constructor(
    readonly attempts: number,
    readonly windowMs: number,
  ) {
    this.stamps = new Float64Array(Math.max(1, attempts));
  }

  /** The earliest time (ms, same clock as `now`) at which one more attempt is allowed. */
  nextAllowedAt(now: number): number {
    if (this.count < this.stamps.length) return now;
    const oldest = this.stamps[this.head]!;
    return Math.max(now, oldest + this.windowMs);
  }

  /** Records an attempt at `now`; false (and nothing recorded) when the budget is spent. */
  tryTake(now: number): boolean {
    if (this.nextAllowedAt(now) > now) return false;
    const size = this.stamps.length;
    if (this.count < size) {
      this.stamps[(this.head + this.count) % size] = now;
      this.count++;
    } else {
      this.stamps[this.head] = now;
      this.head = (this.head + 1) % size;
    }
    return true;
  }

  /** Attempts recorded within the window ending at `now`. */
  used(now: number): number {
    let n = 0;
    const size = this.stamps.length;
    for (let i = 0; i < this.count; i++) if (this.stamps[(this.head + i) % size]! > now - this.windowMs) n++;
    return n;
  }
}
