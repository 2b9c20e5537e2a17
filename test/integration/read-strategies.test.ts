// Read strategies against a real cluster of 3 primaries × 2 replicas, every shard spread over
// three zones. Where each read went is read from the nodes' own INFO commandstats (cmdstat_get
// calls per node, before/after), and from respool's reads_total metric.
//
// Zone layout (set with CONFIG SET availability-zone per live role, since valkey-cli places
// replicas in no fixed order):   shard i: primary az-c, replicas[0] az-a, replicas[1] az-b.
// The fallback tests kill nodes and run last.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import calculateSlot from 'cluster-key-slot';
import { pino } from 'pino';
import { startCluster, type ClusterShard, type ValkeyCluster, type ValkeyNode } from '../harness/valkey-processes.js';
import { parseInfo } from '../harness/raw-client.js';
import { startProxy, type RespoolProxy } from '../../src/server.js';
import { DEFAULT_CONFIG } from '../../src/config/defaults.js';
import type { ReadsConfig, RespoolConfig } from '../../src/config/types.js';
import { clientFor } from '../helpers/proxy.js';

const KEYS = Array.from({ length: 300 }, (_, i) => `rk:${i}`);

let cluster: ValkeyCluster;
let shards: ClusterShard[];
/** Number of KEYS per shard index. */
let perShard: number[];
let metadata: http.Server;
let metadataUrl: string;
let metadataMode: 'answer' | 'hang' = 'answer';

/**
 * respool in-process, with a log that can be captured. `quietLinks`: no saturation sampler either
 * (its INFO cpu every cpuSampleMs goes over the open links, replicas' included).
 */
async function proxyWith(reads: Partial<ReadsConfig>, lines?: string[], quietLinks = false): Promise<RespoolProxy> {
  const base = structuredClone(DEFAULT_CONFIG) as RespoolConfig;
  const config: RespoolConfig = {
    ...base,
    listen: { host: '127.0.0.1', port: 0 },
    upstreams: [{ host: '127.0.0.1', port: cluster.nodes[0]!.port }],
    // No periodic refresh during a test: respool's own INFO calls would blur the counts.
    cluster: { ...base.cluster, refreshPeriodMs: 600_000 },
    reads: { ...base.reads, ...reads },
    ...(quietLinks ? { saturation: { ...base.saturation, cpuSampleMs: 0 } } : {}), // 0: sampler off
  };
  const log = lines
    ? pino({ level: 'warn' }, { write: (l: string) => lines.push(l) })
    : pino({ level: process.env['RESPOOL_TEST_LOG'] ?? 'silent' });
  return startProxy(config, { log });
}

type Stats = Map<number, { get: number; set: number; setRejected: number }>;

async function commandStats(): Promise<Stats> {
  const out: Stats = new Map();
  for (const node of cluster.nodes) {
    if (!node.alive) continue;
    const info = String(await cluster.call(node, 'INFO', 'commandstats'));
    const field = (cmd: string, name: string) => Number(new RegExp(`^cmdstat_${cmd}:.*\\b${name}=(\\d+)`, 'm').exec(info)?.[1] ?? 0);
    out.set(node.port, { get: field('get', 'calls'), set: field('set', 'calls'), setRejected: field('set', 'rejected_calls') });
  }
  return out;
}

/** GET calls per node port while `fn` ran. */
async function getsDuring(fn: () => Promise<void>): Promise<Map<number, number>> {
  const before = await commandStats();
  await fn();
  const after = await commandStats();
  const out = new Map<number, number>();
  for (const [port, s] of after) out.set(port, s.get - (before.get(port)?.get ?? 0));
  return out;
}

/** Reads every key once through the proxy (one pipeline) and checks the values. */
async function readAll(proxy: RespoolProxy, keys = KEYS): Promise<void> {
  const client = clientFor(proxy);
  try {
    const pipeline = client.pipeline();
    for (const k of keys) pipeline.get(k);
    const results = (await pipeline.exec())!;
    results.forEach(([err, value], i) => {
      expect(err).toBeNull();
      expect(value).toBe(`v:${keys[i]}`);
    });
  } finally {
    client.disconnect();
  }
}

const at = (gets: Map<number, number>, node: ValkeyNode) => gets.get(node.port) ?? 0;
const sum = (gets: Map<number, number>, nodes: ValkeyNode[]) => nodes.reduce((n, node) => n + at(gets, node), 0);

/** reads_total values by outcome (summed over strategies and nodes). */
async function readsByOutcome(proxy: RespoolProxy): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const v of (await proxy.metrics.raw.reads_total.get()).values) {
    const outcome = String(v.labels['outcome']);
    out[outcome] = (out[outcome] ?? 0) + v.value;
  }
  return out;
}

async function waitReplicated(): Promise<void> {
  const deadline = Date.now() + 10_000;
  for (const shard of shards) {
    for (;;) {
      const primaryOffset = parseInfo(await cluster.call(shard.primary, 'INFO', 'replication'))['master_repl_offset'];
      const offsets = await Promise.all(
        shard.replicas.filter((r) => r.alive).map(async (r) => parseInfo(await cluster.call(r, 'INFO', 'replication'))['slave_repl_offset']),
      );
      if (offsets.every((o) => o === primaryOffset)) break;
      if (Date.now() > deadline) throw new Error(`replicas of ${shard.primary.address} did not catch up`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }
}

beforeAll(async () => {
  cluster = await startCluster({ primaries: 3, replicasPerPrimary: 2, zones: ['az-a', 'az-b', 'az-c'], nodeTimeoutMs: 1000 });
  shards = await cluster.shards();
  for (const shard of shards) {
    expect(shard.replicas).toHaveLength(2);
    await shard.primary.setZone('az-c');
    await shard.replicas[0]!.setZone('az-a');
    await shard.replicas[1]!.setZone('az-b');
  }
  perShard = shards.map((s) => KEYS.filter((k) => s.slots.some(([a, b]) => calculateSlot(k) >= a && calculateSlot(k) <= b)).length);
  expect(perShard.every((n) => n > 50)).toBe(true);
  // Seed through a primary-only respool (writes go to primaries whatever the strategy).
  const seeder = await proxyWith({});
  const client = clientFor(seeder);
  const pipeline = client.pipeline();
  for (const k of KEYS) pipeline.set(k, `v:${k}`);
  for (const [err] of (await pipeline.exec())!) expect(err).toBeNull();
  client.disconnect();
  await seeder.close();
  await waitReplicated();

  // A fake instance metadata service (AWS IMDSv2 paths) on loopback.
  metadata = http.createServer((req, res) => {
    if (metadataMode === 'hang') return; // never answers
    if (req.method === 'PUT' && req.url === '/latest/api/token') return void res.end('token');
    if (req.url === '/latest/meta-data/placement/availability-zone' && req.headers['x-aws-ec2-metadata-token'] === 'token') {
      return void res.end('az-b');
    }
    res.writeHead(404).end();
  });
  await new Promise<void>((resolve) => metadata.listen(0, '127.0.0.1', resolve));
  metadataUrl = `http://127.0.0.1:${(metadata.address() as AddressInfo).port}`;
}, 90_000);

afterAll(async () => {
  metadata?.closeAllConnections();
  await new Promise((resolve) => (metadata ? metadata.close(resolve) : resolve(undefined)));
  await cluster?.stop();
});

describe('zones and offsets in respool\'s topology', () => {
  it('sees every node\'s zone and replication offset, and a zone change on refresh', async () => {
    const proxy = await proxyWith({ strategy: 'azAffinity', zone: 'az-a' });
    try {
      const topology = proxy.refresher.current!;
      expect(topology.shards).toHaveLength(3);
      for (const shard of topology.shards) {
        expect(shard.primary.zone).toBe('az-c');
        expect(shard.replicas.map((r) => r.zone).sort()).toEqual(['az-a', 'az-b']);
        expect(shard.replicas.every((r) => r.health === 'online')).toBe(true);
        expect(shard.primary.replicationOffset).toBeGreaterThan(0);
        for (const r of shard.replicas) expect(r.replicationOffset).toBe(shard.primary.replicationOffset);
      }
      const moved = shards[0]!.replicas[1]!;
      await moved.setZone('az-x');
      await proxy.refresher.refreshNow('periodic');
      expect(proxy.refresher.current!.allNodes().find((n) => n.port === moved.port)!.zone).toBe('az-x');
      await moved.setZone('az-b');
    } finally {
      await proxy.close();
    }
  });
});

describe('choice order of every strategy, from the nodes\' commandstats', () => {
  const primaries = () => shards.map((s) => s.primary);
  const replicasIn = (i: 0 | 1) => shards.map((s) => s.replicas[i]!);

  it('primary (default): every read on the primaries, none on a replica', async () => {
    const proxy = await proxyWith({});
    try {
      const gets = await getsDuring(() => readAll(proxy));
      shards.forEach((s, i) => expect(at(gets, s.primary)).toBe(perShard[i]));
      expect(sum(gets, [...replicasIn(0), ...replicasIn(1)])).toBe(0);
    } finally {
      await proxy.close();
    }
  });

  it('preferReplica: replicas only, round-robin over each shard\'s two replicas', async () => {
    const proxy = await proxyWith({ strategy: 'preferReplica', zone: 'az-a' });
    try {
      const gets = await getsDuring(() => readAll(proxy));
      expect(sum(gets, primaries())).toBe(0);
      shards.forEach((s, i) => {
        const [a, b] = [at(gets, s.replicas[0]!), at(gets, s.replicas[1]!)];
        expect(a + b).toBe(perShard[i]);
        expect(Math.abs(a - b)).toBeLessThanOrEqual(1);
      });
    } finally {
      await proxy.close();
    }
  });

  it('azAffinity with a replica in respool\'s zone: 100% of reads stay in the zone (metrics and node counts agree)', async () => {
    const proxy = await proxyWith({ strategy: 'azAffinity', zone: 'az-a' });
    try {
      const gets = await getsDuring(() => readAll(proxy));
      shards.forEach((s, i) => expect(at(gets, s.replicas[0]!)).toBe(perShard[i]));
      expect(sum(gets, [...primaries(), ...replicasIn(1)])).toBe(0);
      expect(await readsByOutcome(proxy)).toEqual({ same_zone_replica: KEYS.length });
      const text = await proxy.metrics.render();
      expect(text).toContain('respool_zone_info{zone="az-a",source="config"} 1');
      for (const s of shards) {
        expect(text).toMatch(new RegExp(`respool_reads_total\\{strategy="azAffinity",outcome="same_zone_replica",node="${s.replicas[0]!.address}",zone="az-a"\\} \\d+`));
      }
    } finally {
      await proxy.close();
    }
  });

  it('azAffinity from the primaries\' zone (no replica there): any replica, never the primary', async () => {
    const proxy = await proxyWith({ strategy: 'azAffinity', zone: 'az-c' });
    try {
      const gets = await getsDuring(() => readAll(proxy));
      expect(sum(gets, primaries())).toBe(0);
      shards.forEach((s, i) => {
        const [a, b] = [at(gets, s.replicas[0]!), at(gets, s.replicas[1]!)];
        expect(a + b).toBe(perShard[i]);
        expect(Math.abs(a - b)).toBeLessThanOrEqual(1);
      });
      expect(await readsByOutcome(proxy)).toEqual({ other_zone_replica: KEYS.length });
    } finally {
      await proxy.close();
    }
  });

  it('azAffinityReplicasAndPrimary: same-zone replica; from the primaries\' zone, the primary', async () => {
    const inA = await proxyWith({ strategy: 'azAffinityReplicasAndPrimary', zone: 'az-b' });
    try {
      const gets = await getsDuring(() => readAll(inA));
      shards.forEach((s, i) => expect(at(gets, s.replicas[1]!)).toBe(perShard[i]));
      expect(sum(gets, [...primaries(), ...replicasIn(0)])).toBe(0);
    } finally {
      await inA.close();
    }
    const inC = await proxyWith({ strategy: 'azAffinityReplicasAndPrimary', zone: 'az-c' });
    try {
      const gets = await getsDuring(() => readAll(inC));
      shards.forEach((s, i) => expect(at(gets, s.primary)).toBe(perShard[i]));
      expect(sum(gets, [...replicasIn(0), ...replicasIn(1)])).toBe(0);
      expect(await readsByOutcome(inC)).toEqual({ same_zone_primary: KEYS.length });
    } finally {
      await inC.close();
    }
  });

  it('respool\'s zone has no node: both AZ strategies read from any replica', async () => {
    for (const strategy of ['azAffinity', 'azAffinityReplicasAndPrimary'] as const) {
      const proxy = await proxyWith({ strategy, zone: 'az-d' });
      try {
        const gets = await getsDuring(() => readAll(proxy));
        expect(sum(gets, primaries())).toBe(0);
        shards.forEach((s, i) => {
          const [a, b] = [at(gets, s.replicas[0]!), at(gets, s.replicas[1]!)];
          expect(a + b).toBe(perShard[i]);
          expect(Math.abs(a - b)).toBeLessThanOrEqual(1);
        });
        expect(await readsByOutcome(proxy)).toEqual({ other_zone_replica: KEYS.length });
      } finally {
        await proxy.close();
      }
    }
  });

  it('an AZ strategy without a known own zone falls back to preferReplica, with a warning', async () => {
    const lines: string[] = [];
    const proxy = await proxyWith({ strategy: 'azAffinity' }, lines);
    try {
      expect(lines.join('')).toMatch(/using preferReplica instead/);
      const gets = await getsDuring(() => readAll(proxy));
      expect(sum(gets, primaries())).toBe(0);
      shards.forEach((s, i) => expect(at(gets, s.replicas[0]!) + at(gets, s.replicas[1]!)).toBe(perShard[i]));
      expect(await proxy.metrics.render()).toContain('respool_zone_info{zone="unknown",source="none"} 1');
    } finally {
      await proxy.close();
    }
  });

  it('per-prefix override: keys under "rk:1" read from the primary while the rest follow azAffinity', async () => {
    const proxy = await proxyWith({ strategy: 'azAffinity', zone: 'az-a', prefixes: [{ prefix: 'rk:1', strategy: 'primary' }] });
    try {
      const gets = await getsDuring(() => readAll(proxy));
      shards.forEach((s, i) => {
        const keys = KEYS.filter((k) => s.slots.some(([a, b]) => calculateSlot(k) >= a && calculateSlot(k) <= b));
        const onPrimary = keys.filter((k) => k.startsWith('rk:1')).length;
        expect(at(gets, s.primary)).toBe(onPrimary);
        expect(at(gets, s.replicas[0]!)).toBe(perShard[i]! - onPrimary);
        expect(at(gets, s.replicas[1]!)).toBe(0);
      });
      const outcomes = await readsByOutcome(proxy);
      expect(outcomes['primary']).toBe(KEYS.filter((k) => k.startsWith('rk:1')).length);
    } finally {
      await proxy.close();
    }
  });
});

describe('own zone from an instance metadata service (a fake one on 127.0.0.1)', () => {
  it('zoneFrom aws: discovers az-b at start and reads from the az-b replicas', async () => {
    metadataMode = 'answer';
    const proxy = await proxyWith({ strategy: 'azAffinity', zoneFrom: 'aws', metadataBaseUrl: metadataUrl, metadataTimeoutMs: 1000 });
    try {
      expect(await proxy.metrics.render()).toContain('respool_zone_info{zone="az-b",source="aws"} 1');
      const gets = await getsDuring(() => readAll(proxy));
      shards.forEach((s, i) => expect(at(gets, s.replicas[1]!)).toBe(perShard[i]));
    } finally {
      await proxy.close();
    }
  });

  it('a metadata service that does not answer delays start-up by metadataTimeoutMs at most', async () => {
    metadataMode = 'hang';
    const lines: string[] = [];
    const started = Date.now();
    const proxy = await proxyWith({ strategy: 'azAffinity', zoneFrom: 'aws', metadataBaseUrl: metadataUrl, metadataTimeoutMs: 300 }, lines);
    try {
      expect(Date.now() - started).toBeLessThan(3000);
      expect(lines.join('')).toMatch(/no answer within 300 ms/);
      expect(lines.join('')).toMatch(/using preferReplica instead/);
      const gets = await getsDuring(() => readAll(proxy));
      expect(sum(gets, shards.map((s) => s.primary))).toBe(0);
    } finally {
      metadataMode = 'answer';
      metadata.closeAllConnections();
      await proxy.close();
    }
  });
});

describe('writes never reach a replica', () => {
  it('SET/INCR/DEL under azAffinity: replicas see only the replication stream, none of respool\'s links carries a write', async () => {
    const proxy = await proxyWith({ strategy: 'azAffinity', zone: 'az-a' }, undefined, true); // counts every command on the replica links
    const client = clientFor(proxy);
    try {
      await readAll(proxy); // opens the replica links
      const respoolCommandsOnReplicas = async () => {
        let total = 0;
        for (const s of shards) {
          for (const r of s.replicas) {
            for (const line of String(await cluster.call(r, 'CLIENT', 'LIST')).split('\n')) {
              if (/ name=respool /.test(line)) total += Number(/ tot-cmds=(\d+)/.exec(line)?.[1] ?? 0);
            }
          }
        }
        return total;
      };
      const before = await commandStats();
      const linkCommandsBefore = await respoolCommandsOnReplicas();
      const pipeline = client.pipeline();
      for (const k of KEYS) pipeline.set(`w:${k}`, '1');
      for (const k of KEYS.slice(0, 50)) pipeline.incr(`w:${k}`).del(`w:${k}`);
      for (const [err] of (await pipeline.exec())!) expect(err).toBeNull();
      await waitReplicated();
      const after = await commandStats();
      // No command at all arrived on respool's replica links while only writes were sent.
      expect(await respoolCommandsOnReplicas()).toBe(linkCommandsBefore);
      for (const s of shards) {
        const primarySets = after.get(s.primary.port)!.set - before.get(s.primary.port)!.set;
        expect(primarySets).toBeGreaterThan(0);
        for (const r of s.replicas) {
          // commandstats count replicated writes too: a replica's SET calls equal its primary's,
          // and none was refused (a client write to a replica would be rejected with MOVED).
          expect(after.get(r.port)!.set - before.get(r.port)!.set).toBe(primarySets);
          expect(after.get(r.port)!.setRejected).toBe(0);
          expect(parseInfo(await cluster.call(r, 'INFO', 'errorstats'))['errorstat_MOVED']).toBeUndefined();
        }
      }
    } finally {
      client.disconnect();
      await proxy.close();
    }
  });
});

describe('fallbacks when replicas die (kills nodes: runs last)', () => {
  it('zone\'s replica killed → the other replica; all replicas of the shard killed → the primary; no client errors', async () => {
    const proxy = await proxyWith({ strategy: 'azAffinity', zone: 'az-a' });
    try {
      await readAll(proxy); // links open everywhere
      const [s0, s1, s2] = shards as [ClusterShard, ClusterShard, ClusterShard];

      await cluster.killNode(s0.replicas[0]!);
      let gets = await getsDuring(() => readAll(proxy));
      expect(at(gets, s0.replicas[1]!)).toBe(perShard[0]);
      expect(at(gets, s0.primary)).toBe(0);
      expect(at(gets, s1.replicas[0]!)).toBe(perShard[1]);
      expect(at(gets, s2.replicas[0]!)).toBe(perShard[2]);

      await cluster.killNode(s0.replicas[1]!);
      gets = await getsDuring(() => readAll(proxy));
      expect(at(gets, s0.primary)).toBe(perShard[0]);
      expect(at(gets, s1.replicas[0]!)).toBe(perShard[1]);
      expect(at(gets, s2.replicas[0]!)).toBe(perShard[2]);
      const outcomes = await readsByOutcome(proxy);
      expect(outcomes['primary_fallback']).toBe(perShard[0]);
      expect(outcomes['other_zone_replica']).toBe(perShard[0]);

      // Once the cluster flags them failed, the refreshed topology leaves them out of every plan.
      await cluster.waitForStable({ timeoutMs: 20_000 });
      await proxy.refresher.refreshNow('periodic');
      const dead = new Set([s0.replicas[0]!.port, s0.replicas[1]!.port]);
      const seen = proxy.refresher.current!.allNodes().filter((n) => dead.has(n.port));
      expect(seen.every((n) => n.health !== 'online')).toBe(true);
      gets = await getsDuring(() => readAll(proxy));
      expect(at(gets, s0.primary)).toBe(perShard[0]);
    } finally {
      await proxy.close();
    }
  });
});
