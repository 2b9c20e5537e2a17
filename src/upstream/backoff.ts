/**
 * The one backoff component every retrying path in respool uses (reconnects to an upstream
 * node, request retries, topology refreshes at start-up).
 *
 * Exponential with full jitter: the n-th consecutive failure waits a uniformly random time in
 * [0, min(cap, base·2^n)). Full jitter keeps links (and proxies) that failed together from
 * retrying in lock-step (AWS Architecture Blog, "Exponential Backoff and Jitter"; the constants
 * follow AWS's guidance for Lettuce: base 100 ms, cap 5 s).
 *
 * A backoff only spaces attempts out; it does not bound how many there are. The bounds are the
 * budgets next to it:
 *  - DialBudget (dial-budget.ts): at most N connection attempts per window to a failing node,
 *    shared by every link, pool and client pointing at it;
 *  - RetryBudget (retry-budget.ts): request retries per node as a share of recent traffic;
 *  - CircuitBreaker (circuit-breaker.ts): combines a Backoff and a DialBudget into the one gate
 *    that decides when a failing node may be dialed again (one probe at a time).
 */
export const DEFAULT_BACKOFF_BASE_MS = 100;
export const DEFAULT_BACKOFF_CAP_MS = 5_000;

/** A full-jitter delay for the `attempt`-th retry (0-based): uniform in [0, min(cap, base·2^attempt)). */
export function fullJitterDelay(baseMs: number, capMs: number, attempt: number, random: () => number = Math.random): number {
  const ceiling = Math.min(capMs, baseMs * 2 ** Math.min(attempt, 30));
  return Math.floor(random() * ceiling);
}

export class Backoff {
  private failures = 0;

  constructor(
    private readonly baseMs = DEFAULT_BACKOFF_BASE_MS,
    private readonly capMs = DEFAULT_BACKOFF_CAP_MS,
    private readonly random: () => number = Math.random,
  ) {}

  get consecutiveFailures(): number {
    return this.failures;
  }

  /** Records a failure and returns how long to wait before the next attempt. */
  nextDelayMs(): number {
    return fullJitterDelay(this.baseMs, this.capMs, this.failures++, this.random);
  }

  reset(): void {
    this.failures = 0;
  }
}
