/**
 * A saturated node slows the lowest-priority busy tenants first, down to a floor, before the next
 * priority; the highest busy priority is never slowed; the cut grows back once no node is
 * saturated (src/tenants/tenant-shedding.ts).
 */
import { describe, expect, it } from 'vitest';
import { TenantShedding, type SaturatedNode } from '../../src/tenants/tenant-shedding.js';
import { Tenant } from '../../src/tenants/tenant.js';
import type { TenantConfig } from '../../src/config/types.js';

const tenant = (name: string, priority: number) =>
  new Tenant({ name, keyPrefix: null, upstream: null, priority, limits: { opsPerSecond: null, bytesPerSecond: null, maxClients: null, maxInflight: null } } satisfies TenantConfig);

/** `n` requests handed on by `t` (as over one period). */
const traffic = (t: Tenant, n: number) => {
  for (let i = 0; i < n; i++) t.admitted(10);
};

describe('TenantShedding', () => {
  const setup = (...tenants: Tenant[]) => {
    let nodes: SaturatedNode[] = [];
    const reports: Array<[string, number | null, string]> = [];
    const shedding = new TenantShedding(() => tenants, () => nodes, (t, rate, why) => reports.push([t.name, rate, why]));
    let now = 0;
    const period = (saturated: boolean) => {
      nodes = saturated ? [{ node: '10.0.0.1:6379', reasons: ['cpu'] }] : [];
      for (const t of tenants) traffic(t, 500); // 1,000 requests per second each over a half-second period
      now += 500;
      shedding.tick(now);
    };
    shedding.tick(0);
    return { period, reports };
  };

  it('slows the lowest priority first, to its floor, then the next; never the highest', () => {
    const low = tenant('low', 0);
    const mid = tenant('mid', 5);
    const high = tenant('high', 10);
    const { period, reports } = setup(low, mid, high);
    period(false);
    expect([low, mid, high].map((t) => t.shedOpsPerSecond)).toEqual([null, null, null]);
    period(true);
    expect(low.shedOpsPerSecond).toBeCloseTo(700);
    expect(mid.shedOpsPerSecond).toBeNull();
    expect(low.snapshot().shed).toEqual({ opsPerSecond: 700, why: '10.0.0.1:6379 saturated (cpu)' });
    expect(reports[0]).toEqual(['low', 700, '10.0.0.1:6379 saturated (cpu)']);
    for (let i = 0; i < 6; i++) period(true); // 700 × 0.7^6 ≈ 82 < the floor, a tenth of 1,000
    expect(low.shedOpsPerSecond).toBeCloseTo(100);
    expect(mid.shedOpsPerSecond).toBeNull();
    period(true); // low at its floor: now mid
    expect(low.shedOpsPerSecond).toBeCloseTo(100);
    expect(mid.shedOpsPerSecond).toBeCloseTo(700);
    for (let i = 0; i < 20; i++) period(true);
    expect(mid.shedOpsPerSecond).toBeCloseTo(100);
    expect(high.shedOpsPerSecond).toBeNull(); // the top priority is spared
    // no node saturated: the cuts grow back and are lifted
    for (let i = 0; i < 20; i++) period(false);
    expect([low, mid, high].map((t) => t.shedOpsPerSecond)).toEqual([null, null, null]);
    expect(reports.at(-1)![1]).toBeNull();
  });

  it('one priority among the busy tenants: nobody is slowed; a slowed tenant is held as by a rate', () => {
    const a = tenant('a', 0);
    const b = tenant('b', 0);
    const { period } = setup(a, b);
    period(true);
    expect([a.shedOpsPerSecond, b.shedOpsPerSecond]).toEqual([null, null]);
    const c = tenant('c', -1);
    c.setShedRate(10, 'test');
    traffic(c, 50);
    expect(c.mayAdmit({ closed: false, tenantReady: () => {} })).toBe(false);
    expect(c.snapshot().held.shed).toBe(1);
  });
});
