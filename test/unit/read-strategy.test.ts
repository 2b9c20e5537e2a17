import { describe, expect, it, vi } from 'vitest';
import { pino } from 'pino';
import { Topology, type ClusterNode, type Shard } from '../../src/cluster/topology.js';
import { ReadRouting, REPLICA_HOLD_MS, type ReadStrategy } from '../../src/routing/read-strategy.js';
import { DEFAULT_CONFIG } from '../../src/config/defaults.js';
import type { ReadsConfig, ReadStrategyName } from '../../src/config/types.js';
import { Metrics } from '../../src/metrics/metrics.js';

const silent = pino({ level: 'silent' });

function node(port: number, role: 'primary' | 'replica', zone: string | null, extra: Partial<ClusterNode> = {}): ClusterNode {
  return {
    id: `n${port}`, host: '127.0.0.1', port, address: `127.0.0.1:${port}`, role, health: 'online', zone,
    replicationOffset: 1000, ...extra,
  };
}

/** One shard: primary in az-c, replicas in az-a (7001, 7002) and az-b (7003). */
function shard(extra: { primary?: Partial<ClusterNode>; replicas?: Array<Partial<ClusterNode>> } = {}): Shard {
  const zones = ['az-a', 'az-a', 'az-b'];
  return {
    primary: node(7000, 'primary', 'az-c', extra.primary),
    replicas: zones.map((z, i) => node(7001 + i, 'replica', z, extra.replicas?.[i])),
    slots: [[0, 16383]],
  };
}

function routing(reads: Partial<ReadsConfig>, zone: string | null, metrics?: Metrics): ReadRouting {
  const r = new ReadRouting({ ...DEFAULT_CONFIG.reads, prefixes: [], ...reads }, silent, metrics);
  r.setOwnZone(zone, zone === null ? 'none' : 'config');
  return r;
}

/** The tiers as "port/outcome" strings. */
function order(r: ReadRouting, s: Shard, strategy: ReadStrategy = r.global): string[][] {
  return r.order(s, strategy).map((tier) => tier.map((c) => `${c.node.port}/${c.outcome}`));
}

/** Ports of n consecutive choices. */
function picks(r: ReadRouting, s: Shard, n: number, avoid: string[] | null = null, strategy: ReadStrategy = r.global): number[] {
  return Array.from({ length: n }, () => r.choose(s, strategy, avoid).node.port);
}

describe('read strategy choice order', () => {
  it('primary: only the primary', () => {
    const r = routing({ strategy: 'primary' }, 'az-a');
    expect(r.active).toBe(false);
    expect(order(r, shard())).toEqual([['7000/primary']]);
  });

  it('preferReplica: every replica round-robin, then the primary', () => {
    const r = routing({ strategy: 'preferReplica' }, 'az-a');
    expect(r.active).toBe(true);
    expect(order(r, shard())).toEqual([
      ['7001/same_zone_replica', '7002/same_zone_replica', '7003/other_zone_replica'],
      ['7000/primary_fallback'],
    ]);
    expect(picks(r, shard(), 6).sort()).toEqual([7001, 7001, 7002, 7002, 7003, 7003]);
  });

  it('azAffinity: replicas in own zone, then any other replica, then the primary', () => {
    const r = routing({ strategy: 'azAffinity' }, 'az-a');
    const s = shard();
    expect(order(r, s)).toEqual([
      ['7001/same_zone_replica', '7002/same_zone_replica'],
      ['7003/other_zone_replica'],
      ['7000/primary_fallback'],
    ]);
    expect(picks(r, s, 4).sort()).toEqual([7001, 7001, 7002, 7002]);
    expect(picks(r, s, 3, ['127.0.0.1:7001'])).toEqual([7002, 7002, 7002]);
    expect(picks(r, s, 2, ['127.0.0.1:7001', '127.0.0.1:7002'])).toEqual([7003, 7003]);
    expect(picks(r, s, 2, ['127.0.0.1:7001', '127.0.0.1:7002', '127.0.0.1:7003'])).toEqual([7000, 7000]);
  });

  it('azAffinityReplicasAndPrimary: own-zone replicas, own-zone primary, other replicas, primary', () => {
    const inA = routing({ strategy: 'azAffinityReplicasAndPrimary' }, 'az-a');
    expect(order(inA, shard())).toEqual([
      ['7001/same_zone_replica', '7002/same_zone_replica'],
      ['7003/other_zone_replica'],
      ['7000/primary_fallback'],
    ]);
    // respool in the primary's zone (no replica there): the primary comes before other-zone replicas.
    const inC = routing({ strategy: 'azAffinityReplicasAndPrimary' }, 'az-c');
    expect(order(inC, shard())).toEqual([
      ['7000/same_zone_primary'],
      ['7001/other_zone_replica', '7002/other_zone_replica', '7003/other_zone_replica'],
    ]);
    expect(picks(inC, shard(), 3)).toEqual([7000, 7000, 7000]);
    // azAffinity in az-c instead spreads over the other zones' replicas.
    const az = routing({ strategy: 'azAffinity' }, 'az-c');
    expect(picks(az, shard(), 3).sort()).toEqual([7001, 7002, 7003]);
  });

  it('a zone with no node: any replica, then the primary', () => {
    for (const strategy of ['azAffinity', 'azAffinityReplicasAndPrimary'] as const) {
      const r = routing({ strategy }, 'az-z');
      expect(order(r, shard())).toEqual([
        ['7001/other_zone_replica', '7002/other_zone_replica', '7003/other_zone_replica'],
        ['7000/primary_fallback'],
      ]);
    }
  });

  it('an AZ strategy without own zone behaves as preferReplica and warns', () => {
    const lines: string[] = [];
    const log = pino({ level: 'warn' }, { write: (l: string) => lines.push(l) });
    const r = new ReadRouting({ ...DEFAULT_CONFIG.reads, strategy: 'azAffinity', prefixes: [] }, log);
    r.setOwnZone(null, 'none');
    expect(r.global.effective).toBe('preferReplica');
    expect(lines.join('')).toMatch(/using preferReplica instead/);
    expect(order(r, shard())).toEqual([
      ['7001/other_zone_replica', '7002/other_zone_replica', '7003/other_zone_replica'],
      ['7000/primary_fallback'],
    ]);
    r.setOwnZone('az-b', 'config');
    expect(r.global.effective).toBe('azAffinity');
    expect(order(r, shard())[0]).toEqual(['7003/same_zone_replica']);
  });

  it('leaves out failed, loading and lagging replicas', () => {
    const s = shard({
      primary: { replicationOffset: 10_000 },
      replicas: [{ health: 'failed' }, { health: 'loading' }, { replicationOffset: 9_000 }],
    });
    expect(order(routing({ strategy: 'preferReplica' }, 'az-a'), s)).toEqual([
      ['7003/other_zone_replica'],
      ['7000/primary_fallback'],
    ]);
    // 1,000 bytes behind: within 4kb, beyond 500 bytes.
    expect(order(routing({ strategy: 'preferReplica', maxReplicaLagBytes: 4096 }, 'az-a'), s)[0]).toEqual(['7003/other_zone_replica']);
    expect(order(routing({ strategy: 'preferReplica', maxReplicaLagBytes: 500 }, 'az-a'), s)).toEqual([['7000/primary_fallback']]);
  });

  it('skips a replica that failed a read for REPLICA_HOLD_MS, for every request', async () => {
    const r = routing({ strategy: 'azAffinity' }, 'az-b');
    const s = shard();
    expect(picks(r, s, 2)).toEqual([7003, 7003]);
    r.markFailed('127.0.0.1:7003');
    expect(picks(r, s, 4).sort()).toEqual([7001, 7001, 7002, 7002]);
    await new Promise((resolve) => setTimeout(resolve, REPLICA_HOLD_MS + 20));
    expect(picks(r, s, 2)).toEqual([7003, 7003]);
  });

  it('doubles the hold of a replica that keeps failing, and resets it once it serves a read', () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    try {
      const r = routing({ strategy: 'azAffinity' }, 'az-b');
      const s = shard();
      const far = '127.0.0.1:7003';
      r.markFailed(far);
      r.markFailed(far); // a second failure from a read sent before the hold: no escalation
      vi.advanceTimersByTime(REPLICA_HOLD_MS - 1);
      expect(r.choose(s, r.global, null).node.port).not.toBe(7003);
      vi.advanceTimersByTime(2);
      expect(r.choose(s, r.global, null).node.port).toBe(7003);
      r.markFailed(far); // fails again after its hold: twice as long
      vi.advanceTimersByTime(2 * REPLICA_HOLD_MS - 1);
      expect(r.choose(s, r.global, null).node.port).not.toBe(7003);
      vi.advanceTimersByTime(2);
      expect(r.choose(s, r.global, null).node.port).toBe(7003);
      r.markServed(far);
      r.markFailed(far); // served in between: back to the shortest hold
      vi.advanceTimersByTime(REPLICA_HOLD_MS + 1);
      expect(r.choose(s, r.global, null).node.port).toBe(7003);
    } finally {
      vi.useRealTimers();
    }
  });

  it('per-prefix overrides: the longest matching prefix wins, else the global strategy', () => {
    const r = routing(
      {
        strategy: 'azAffinity',
        prefixes: [
          { prefix: 'session:', strategy: 'primary' },
          { prefix: 'session:cache:', strategy: 'preferReplica' },
        ],
      },
      'az-a',
    );
    const of = (key: string | undefined): ReadStrategyName => r.strategyFor(key === undefined ? undefined : Buffer.from(key)).name;
    expect(of('session:42')).toBe('primary');
    expect(of('session:cache:42')).toBe('preferReplica');
    expect(of('sess')).toBe('azAffinity');
    expect(of('user:1')).toBe('azAffinity');
    expect(of(undefined)).toBe('azAffinity');
    expect(order(r, shard(), r.strategyFor(Buffer.from('session:1')))).toEqual([['7000/primary']]);
  });

  it('keeps one plan per shard snapshot and counts reads per strategy, outcome, node and zone', async () => {
    const metrics = new Metrics({ defaultMetrics: false });
    const r = routing({ strategy: 'azAffinity' }, 'az-a', metrics);
    const topology = new Topology('cluster', [shard()], 'test');
    const s = topology.shards[0]!;
    const first = r.choose(s, r.global, null);
    first.counter!.inc();
    expect(r.order(s, r.global)).toBe(r.order(s, r.global));
    const text = await metrics.render();
    expect(text).toContain(`respool_reads_total{strategy="azAffinity",outcome="same_zone_replica",node="${first.node.address}",zone="az-a"} 1`);
    expect(text).toContain('respool_zone_info{zone="az-a",source="config"} 1');
  });
});
