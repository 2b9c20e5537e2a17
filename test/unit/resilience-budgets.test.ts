import { describe, expect, it } from 'vitest';
import { Backoff, fullJitterDelay } from '../../src/upstream/backoff.js';
import { DialBudget } from '../../src/upstream/dial-budget.js';
import { RetryBudget } from '../../src/upstream/retry-budget.js';
import { CircuitBreaker, type CircuitState } from '../../src/upstream/circuit-breaker.js';

/** A deterministic random source cycling through the given values. */
function seq(...values: number[]): () => number {
  let i = 0;
  return () => values[i++ % values.length]!;
}

describe('Backoff (full jitter, base and cap)', () => {
  it('doubles the ceiling per failure up to the cap, and draws uniformly below it', () => {
    const b = new Backoff(100, 5000, () => 0.999999);
    const delays = Array.from({ length: 9 }, () => b.nextDelayMs());
    expect(delays).toEqual([99, 199, 399, 799, 1599, 3199, 4999, 4999, 4999]);
    expect(b.consecutiveFailures).toBe(9);
    b.reset();
    expect(b.nextDelayMs()).toBe(99);
  });

  it('spreads links that failed together (no lock-step)', () => {
    const delays = Array.from({ length: 50 }, () => new Backoff(100, 5000).nextDelayMs() + new Backoff(100, 5000).nextDelayMs());
    expect(new Set(delays).size).toBeGreaterThan(25);
    for (const d of delays) expect(d).toBeLessThan(200);
  });

  it('fullJitterDelay never exceeds the cap, even for huge attempt numbers', () => {
    for (const attempt of [0, 5, 40, 1e6]) expect(fullJitterDelay(50, 1000, attempt, () => 0.9999)).toBeLessThan(1000);
    expect(fullJitterDelay(50, 1000, 0, () => 0)).toBe(0);
  });
});

describe('DialBudget (N attempts per sliding window)', () => {
  it('allows N attempts per window, then the next one when the oldest leaves the window', () => {
    const budget = new DialBudget(3, 1000);
    expect(budget.tryTake(0)).toBe(true);
    expect(budget.tryTake(100)).toBe(true);
    expect(budget.tryTake(200)).toBe(true);
    expect(budget.tryTake(300)).toBe(false);
    expect(budget.nextAllowedAt(300)).toBe(1000);
    expect(budget.tryTake(999)).toBe(false);
    expect(budget.tryTake(1000)).toBe(true);
    expect(budget.used(1000)).toBe(3);
    expect(budget.nextAllowedAt(1000)).toBe(1100);
  });

  it('never lets more than N attempts into any window, whatever the asking rate', () => {
    const budget = new DialBudget(10, 2000);
    const taken: number[] = [];
    for (let t = 0; t < 20_000; t += 7) if (budget.tryTake(t)) taken.push(t);
    for (const start of taken) expect(taken.filter((t) => t >= start && t < start + 2000).length).toBeLessThanOrEqual(10);
    expect(taken.length).toBeGreaterThanOrEqual(100); // and it does allow the budget
  });
});

describe('RetryBudget (token bucket per node)', () => {
  it('caps retries at a share of the traffic plus a floor', () => {
    const now = 0;
    const budget = new RetryBudget(10, 0, now);
    // Start full (capacity 10): drain it.
    let granted = 0;
    while (budget.tryWithdraw(now)) granted++;
    expect(granted).toBe(10);
    // 1000 requests deposit 100 tokens but the bucket holds 10.
    for (let i = 0; i < 1000; i++) budget.deposit();
    granted = 0;
    while (budget.tryWithdraw(now)) granted++;
    expect(granted).toBe(10);
    // 50 requests → 5 retries.
    for (let i = 0; i < 50; i++) budget.deposit();
    granted = 0;
    while (budget.tryWithdraw(now)) granted++;
    expect(granted).toBe(5);
  });

  it('refills at minPerSecond when there is no traffic', () => {
    const budget = new RetryBudget(10, 5, 0);
    while (budget.tryWithdraw(0));
    expect(budget.tryWithdraw(100)).toBe(false);
    expect(budget.tryWithdraw(1000)).toBe(true); // 5 tokens after 1 s
    expect(budget.available(1000)).toBeCloseTo(4, 5);
  });
});

describe('CircuitBreaker (per node: dial gate, probes, open/half-open)', () => {
  function breaker(threshold = 3, attempts = 10, windowMs = 15_000) {
    const states: CircuitState[] = [];
    let exhausted = 0;
    const cb = new CircuitBreaker({
      threshold, backoffBaseMs: 100, backoffCapMs: 5000, dialAttemptsPerWindow: attempts, dialWindowMs: windowMs,
      random: () => 0.5, onStateChange: (s) => states.push(s), onBudgetExhausted: () => exhausted++,
    });
    return { cb, states, exhausted: () => exhausted };
  }

  it('lets a healthy node be dialed freely', () => {
    const { cb } = breaker();
    for (let i = 0; i < 100; i++) expect(cb.tryAcquireDial(0)).toBe(true);
    expect(cb.state).toBe('closed');
  });

  it('after a lost link, allows one probe at a time (links do not redial together)', () => {
    const { cb } = breaker();
    cb.onLinkLost('connection closed by upstream');
    expect(cb.tryAcquireDial(0)).toBe(true);
    expect(cb.tryAcquireDial(0)).toBe(false); // the probe is in flight
    cb.onDialSuccess();
    expect(cb.tryAcquireDial(0)).toBe(true);
    expect(cb.tryAcquireDial(0)).toBe(true);
  });

  it('opens after threshold consecutive failures, half-opens with one probe, closes on success', () => {
    const { cb, states } = breaker(3);
    let now = 0;
    for (let i = 0; i < 3; i++) {
      expect(cb.tryAcquireDial(now)).toBe(true);
      cb.onDialFailure('ECONNREFUSED', now);
      expect(cb.tryAcquireDial(now)).toBe(false); // backoff
      now = cb.nextDialAt;
    }
    expect(cb.state).toBe('open');
    expect(cb.isOpen).toBe(true);
    expect(cb.tryAcquireDial(now)).toBe(true);
    expect(cb.state).toBe('half-open');
    expect(cb.tryAcquireDial(now)).toBe(false);
    cb.onDialFailure('ECONNREFUSED', now);
    expect(cb.state).toBe('open');
    now = cb.nextDialAt;
    expect(cb.tryAcquireDial(now)).toBe(true);
    cb.onDialSuccess();
    expect(cb.state).toBe('closed');
    expect(states).toEqual(['open', 'half-open', 'open', 'half-open', 'closed']);
  });

  it('dials a dead node at most the budgeted number of times per window, however often asked', () => {
    const { cb, exhausted } = breaker(3, 10, 2000);
    cb.onLinkLost('gone');
    const dials: number[] = [];
    // 50 links' worth of asking every 5 ms for 10 s; every dial fails at once.
    for (let now = 0; now < 10_000; now += 5) {
      for (let link = 0; link < 50; link++) {
        if (cb.tryAcquireDial(now)) {
          dials.push(now);
          cb.onDialFailure('ECONNREFUSED', now);
        }
      }
    }
    for (const start of dials) expect(dials.filter((t) => t >= start && t < start + 2000).length).toBeLessThanOrEqual(10);
    expect(dials.length).toBeLessThanOrEqual(50);
    expect(dials.length).toBeGreaterThan(5);
    expect(exhausted()).toBeGreaterThanOrEqual(0);
  });

  it('counts command timeouts (a black-hole node) toward opening', () => {
    const { cb } = breaker(2);
    cb.onCommandTimeout('did not answer', 0);
    cb.onCommandTimeout('did not answer', 0);
    expect(cb.state).toBe('open');
  });
});
