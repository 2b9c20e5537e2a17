/**
 * A rate as a bucket of tokens: `ratePerSecond` come in, up to `burst`; a use takes what it costs
 * even below zero (a big request's bytes are a debt the next uses wait out), and `available` is
 * true while the bucket is above zero. Over a long run what is taken is the rate, to within
 * `burst` (docs/tenants.md).
 *
 *   tokens(t) = min(burst, tokens(t0) + (t - t0) × rate)      take(n): tokens -= n
 */
export class TokenBucket {
  private tokens: number;
  private at: number;

  constructor(
    private ratePerSecond: number,
    private burst: number,
    now: number,
  ) {
    this.tokens = burst;
    this.at = now;
  }

  /** A new rate and depth from now on (its share of a budget changed): what was taken stays taken. */
  setRate(ratePerSecond: number, burst: number, now: number): void {
    this.refill(now);
    this.ratePerSecond = ratePerSecond;
    this.burst = burst;
    this.tokens = Math.min(this.tokens, burst);
  }

  /** Whether a use may start now (the bucket is above zero). */
  available(now: number): boolean {
    this.refill(now);
    return this.tokens > 0;
  }

  /** A use of `n` tokens (it may leave the bucket below zero). */
  take(n: number, now: number): void {
    this.refill(now);
    this.tokens -= n;
  }

  /** Milliseconds until the bucket is above zero again (0: it is now). */
  msUntilAvailable(now: number): number {
    this.refill(now);
    return this.tokens > 0 ? 0 : ((-this.tokens + 1e-9) * 1000) / this.ratePerSecond;
  }

  private refill(now: number): void {
    if (now <= this.at) return;
    this.tokens = Math.min(this.burst, this.tokens + ((now - this.at) * this.ratePerSecond) / 1000);
    this.at = now;
  }
}
