/**
 * A tenant's limits divided among workers and fleet members (src/tenants/tenant-budgets.ts): the
 * parts add up to the whole; members a limit holds share what the others do not use; a member
 * gone gives its part back; shares follow the traffic as it moves.
 */
import { describe, expect, it } from 'vitest';
import { TenantBudgets, waterFill, type UsageReport } from '../../src/tenants/tenant-budgets.js';
import { HELD_OPS, Tenant } from '../../src/tenants/tenant.js';
import type { TenantConfig } from '../../src/config/types.js';

const config: TenantConfig = { name: 't', keyPrefix: null, upstream: null, limits: { opsPerSecond: 1000, bytesPerSecond: null, maxClients: 10, maxInflight: null } };

/** A report of another member: its tenant `t` used `ops` per second, held by the rate or not. */
const report = (member: string, ops: number, held: boolean, clients = 1): UsageReport => ({ member, tenants: { t: { ops, bytes: 0, clients, inflight: 0, held: held ? HELD_OPS : 0 } } });

describe('waterFill', () => {
  it('meets small demands, levels the rest, and always hands out the whole', () => {
    expect(waterFill(100, [Infinity, Infinity])).toEqual([50, 50]);
    expect(waterFill(100, [10, Infinity])).toEqual([10, 90]);
    expect(waterFill(100, [10, 20, Infinity, Infinity])).toEqual([10, 20, 35, 35]);
    expect(waterFill(100, [10, 30])).toEqual([40, 60]); // what no one wants: evenly to all
    const parts = waterFill(1000, [5, 700, Infinity, 120]);
    expect(parts.reduce((a, b) => a + b, 0)).toBeCloseTo(1000);
  });
});

describe('TenantBudgets', () => {
  const setup = (expected: number) => {
    const tenant = new Tenant(config);
    const sent: UsageReport[] = [];
    const budgets = new TenantBudgets('me', () => [tenant], { send: (r) => sent.push(r), expectedMembers: () => expected });
    return { tenant, budgets, sent };
  };

  it('alone: the whole limit', () => {
    const { tenant, budgets } = setup(1);
    budgets.tick(1000);
    expect(tenant.snapshot().allowed.opsPerSecond).toBe(1000);
  });

  const holdOn = (tenant: Tenant) => {
    for (let i = 0; i < 100; i++) tenant.admitted(10);
    expect(tenant.mayAdmit({ closed: false, tenantReady: () => {} })).toBe(false); // held by the rate
  };

  it('two members both held: half each; the other idle: this one takes all but its floor', () => {
    const { tenant, budgets, sent } = setup(2);
    budgets.tick(0); // idle here (a floor: 5% of an even share), the other not heard from yet (an even share)
    expect(tenant.snapshot().allowed.opsPerSecond).toBeCloseTo(25 + 475 / 2);
    holdOn(tenant);
    budgets.receive(report('other', 500, true), 200);
    budgets.tick(250);
    expect(tenant.snapshot().allowed.opsPerSecond).toBeCloseTo(500);
    expect(sent.at(-1)!.member).toBe('me');
    expect(sent.at(-1)!.tenants['t']!.held & HELD_OPS).toBe(HELD_OPS);
    holdOn(tenant);
    budgets.receive(report('other', 0, false, 0), 450);
    budgets.tick(500);
    expect(tenant.snapshot().allowed.opsPerSecond).toBeCloseTo(975);
    // the other silent for a second: gone — still expected, so an even share stays reserved for it
    budgets.tick(2000);
    expect(tenant.snapshot().allowed.opsPerSecond).toBeCloseTo(25 + 475 / 2);
  });

  it('follows the traffic: an idle member keeps its floor; held, it levels up with the busy one', () => {
    const { tenant, budgets } = setup(2);
    budgets.receive(report('other', 900, false), 0);
    budgets.tick(0); // the other wants 900 × 1.25: it gets all but this member's floor
    expect(tenant.snapshot().allowed.opsPerSecond).toBeCloseTo(25);
    holdOn(tenant);
    budgets.receive(report('other', 900, false), 200);
    budgets.tick(250); // max-min fair: 500 each (the other, cut below its use, is held next and stays level)
    expect(tenant.snapshot().allowed.opsPerSecond).toBeCloseTo(500);
  });

  it('clients: a member\'s part of maxClients is a whole number, at least 1', () => {
    const { tenant, budgets } = setup(4);
    budgets.tick(0);
    expect(tenant.snapshot().allowed.maxClients).toBeGreaterThanOrEqual(1);
    expect(Number.isInteger(tenant.snapshot().allowed.maxClients)).toBe(true);
  });
});
