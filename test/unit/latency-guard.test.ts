import { describe, expect, it } from 'vitest';
import { RecentLatency } from '../../src/metrics/recent-latency.js';
import { GUARD_MIN_CALLS, LatencyGuard, MIN_SHARE, START_SHARE } from '../../src/migration/latency-guard.js';

/** A clock the test moves, and a RecentLatency on it. */
function clocked(): { clock: { t: number }; recent: RecentLatency; second: (ms: number, n?: number) => void } {
  const clock = { t: 1_000_000 };
  const recent = new RecentLatency(() => clock.t);
  // One second of requests, each taking `ms`: recorded, then the slot closed.
  const second = (ms: number, n = 1_000) => {
    for (let i = 0; i < n; i++) recent.recordMs(ms);
    clock.t += 1_000;
    recent.rotate();
  };
  return { clock, recent, second };
}

describe('RecentLatency', () => {
  it('keeps whole seconds: since() adds the slots begun at or after a time, never the one filling', () => {
    const { clock, recent, second } = clocked();
    second(0.1, 10);
    const from = clock.t;
    second(0.2, 20);
    second(0.3, 30);
    recent.recordMs(5); // the current slot: not whole yet
    expect(recent.since(0).count).toBe(60);
    expect(recent.since(from).count).toBe(50);
    expect(recent.since(clock.t).count).toBe(0);
  });

  it('forgets what is older than its ring (a minute and a bit)', () => {
    const { recent, second } = clocked();
    for (let s = 0; s < 100; s++) second(0.1, 1);
    expect(recent.since(0).count).toBe(63);
  });
});

describe('LatencyGuard', () => {
  it('starts at a tenth of the pace, grows by a quarter a second while the p99 stays within the rise, up to the whole', () => {
    const { clock, recent, second } = clocked();
    for (let s = 0; s < 60; s++) second(0.2);
    const guard = new LatencyGuard(recent, 1.2, 0, 0, () => clock.t);
    expect(guard.state()).toMatchObject({ guard: 'on', share: START_SHARE });
    const before = guard.state().p99BeforeUs;
    expect(before).toBeGreaterThan(180);
    expect(before).toBeLessThan(260);
    const shares: number[] = [];
    for (let s = 0; s < 12; s++) {
      second(0.21); // within 1.2×
      shares.push(guard.currentShare());
    }
    expect(shares[0]).toBeCloseTo(START_SHARE * 1.25);
    expect(shares.at(-1)).toBe(1);
  });

  it('halves the pace each second the p99 is above the rise, down to its least, and says what it read', () => {
    const { clock, recent, second } = clocked();
    for (let s = 0; s < 60; s++) second(0.2);
    const guard = new LatencyGuard(recent, 1.2, 0, 0, () => clock.t);
    for (let s = 0; s < 12; s++) {
      second(0.2);
      guard.currentShare();
    }
    for (let s = 0; s < 20; s++) expect(guard.currentShare()).toBe(1); // read many times within one second: decided once
    const shares: number[] = [];
    for (let s = 0; s < 10; s++) {
      second(1); // 5× before
      shares.push(guard.currentShare());
    }
    expect(shares.slice(0, 3)).toEqual([0.5, 0.25, 0.125]);
    expect(shares.at(-1)).toBe(MIN_SHARE);
    expect(guard.state().p99NowUs).toBeGreaterThan(900);
  });

  it('the baseline is the usual second: one slow second before START does not raise it', async () => {
    const { clock, recent, second } = clocked();
    for (let s = 0; s < 30; s++) second(0.2);
    second(5); // a pause
    for (let s = 0; s < 29; s++) second(0.2);
    const guard = new LatencyGuard(recent, 1.2, 0, 0, () => clock.t);
    expect(guard.state().p99BeforeUs).toBeLessThan(260);
  });

  it('without enough requests before START there is no baseline: the whole pace, "no baseline"', () => {
    const { clock, recent, second } = clocked();
    for (let s = 0; s < 60; s++) second(0.2, Math.floor((GUARD_MIN_CALLS - 1) / 60));
    const guard = new LatencyGuard(recent, 1.2, 0, 0, () => clock.t);
    second(50);
    second(50);
    second(50);
    expect(guard.currentShare()).toBe(1);
    expect(guard.state()).toMatchObject({ guard: 'no baseline', p99BeforeUs: 0 });
  });

  it("the minute before START begins no earlier than the last migration ended: an earlier copy's seconds are not a baseline", () => {
    const { clock, recent, second } = clocked();
    for (let s = 0; s < 30; s++) second(0.1);
    for (let s = 0; s < 20; s++) second(2); // an earlier copy
    const ended = clock.t;
    for (let s = 0; s < 5; s++) second(0.1);
    const guard = new LatencyGuard(recent, 1.2, ended, 0, () => clock.t);
    expect(guard.state().p99BeforeUs).toBeLessThan(150);
  });

  it("START again right after an ABORT (too little since it ended): the earlier migration's baseline", () => {
    const { clock, recent, second } = clocked();
    for (let s = 0; s < 60; s++) second(2); // the earlier copy
    const ended = clock.t;
    second(2, 100);
    const guard = new LatencyGuard(recent, 1.2, ended, 230, () => clock.t);
    expect(guard.state()).toMatchObject({ guard: 'on', p99BeforeUs: 230 });
    expect(new LatencyGuard(recent, 1.2, ended, 0, () => clock.t).state().guard).toBe('no baseline');
  });

  it('a quiet spell during the copy (too few requests) leaves the pace where it was', () => {
    const { clock, recent, second } = clocked();
    for (let s = 0; s < 60; s++) second(0.2);
    const guard = new LatencyGuard(recent, 1.2, 0, 0, () => clock.t);
    for (let s = 0; s < 4; s++) second(50, 10);
    expect(guard.currentShare()).toBe(START_SHARE);
  });
});
