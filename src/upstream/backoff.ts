/**
 * Exponential backoff with full jitter: the n-th consecutive failure waits a uniformly random
 * time in [0, min(cap, base·2^n)). Full jitter keeps links that failed together from retrying
 * in lock-step (AWS Architecture Blog, "Exponential Backoff and Jitter").
 */
export const DEFAULT_BACKOFF_BASE_MS = 100;
export const DEFAULT_BACKOFF_CAP_MS = 5_000;

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
    const ceiling = Math.min(this.capMs, this.baseMs * 2 ** Math.min(this.failures, 30));
    this.failures++;
    return Math.floor(this.random() * ceiling);
  }

  reset(): void {
    this.failures = 0;
  }
}
