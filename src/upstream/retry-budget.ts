/**
 * A per-node retry budget, token-bucket style (Finagle's RetryBudget, grpc-js RetryThrottler):
 * retries may add at most `percent`% to a node's recent traffic, plus a small floor so that a
 * quiet node can still retry a little.
 *
 *   tokens   : every request sent to the node deposits percent/100 of a token; the floor adds
 *              minPerSecond tokens per second; the bucket holds at most `capacity` tokens
 *   a retry  : withdraws one whole token; with less than one token left it is refused and the
 *              client gets the error instead, so retries cannot multiply load on a node that is
 *              already failing.
 *
 * The hot path (deposit) is one multiply-free add and a compare.
 */
export class RetryBudget {
  private tokens: number;
  private lastRefill: number;
  private readonly perRequest: number;
  readonly capacity: number;

  constructor(
    percent: number,
    private readonly minPerSecond: number,
    now: number = Date.now(),
  ) {
    this.perRequest = percent / 100;
    // Enough for a burst of ten seconds' floor, or at least 10 retries.
    this.capacity = Math.max(10, minPerSecond * 10);
    this.tokens = this.capacity;
    this.lastRefill = now;
  }

  /** A request was sent to the node. */
  deposit(): void {
    const t = this.tokens + this.perRequest;
    this.tokens = t > this.capacity ? this.capacity : t;
  }

  /** Takes a token for one retry; false when the budget is exhausted. */
  tryWithdraw(now: number = Date.now()): boolean {
    this.refill(now);
    if (this.tokens < 1 - 1e-9) return false; // tolerate float sums like 50 × 0.1
    this.tokens = Math.max(0, this.tokens - 1);
    return true;
  }

  /** Tokens left (for tests and metrics). */
  available(now: number = Date.now()): number {
    this.refill(now);
    return this.tokens;
  }

  private refill(now: number): void {
    const elapsed = now - this.lastRefill;
    if (elapsed <= 0) return;
    this.lastRefill = now;
    const t = this.tokens + (elapsed * this.minPerSecond) / 1000;
    this.tokens = t > this.capacity ? this.capacity : t;
  }
}
