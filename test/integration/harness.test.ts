// The harness itself: real valkey-server processes, standalone and cluster.
import { afterAll, describe, expect, it } from 'vitest';
import { parseInfo, rawCall, RawClient, ReplyError } from '../harness/raw-client.js';
import {
  CLUSTER_SLOTS,
  freePort,
  startCluster,
  startStandalone,
  type ValkeyCluster,
  type ValkeyNode,
} from '../harness/valkey-processes.js';

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function waitDead(pid: number, ms = 5000): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (!pidAlive(pid)) return true;
    await new Promise((r) => setTimeout(r, 20));
  }
  return !pidAlive(pid);
}

const pids = new Set<number>();
const track = (n: ValkeyNode) => pids.add(n.pid);

afterAll(async () => {
  for (const pid of pids) expect(await waitDead(pid), `pid ${pid} still running`).toBe(true);
});

describe('freePort', () => {
  it('hands out distinct ports whose bus port is free too', async () => {
    const ports = await Promise.all(Array.from({ length: 20 }, () => freePort()));
    expect(new Set(ports).size).toBe(20);
    for (const p of ports) expect(p + 10000).toBeLessThan(65536);
  });
});

describe('standalone', () => {
  it('starts, answers PING, stops and removes its dir', async () => {
    const node = await startStandalone();
    track(node);
    try {
      expect(await rawCall(node.port, ['PING'])).toBe('PONG');
      expect(await node.call('SET', 'k', 'v')).toBe('OK');
      expect(await node.call('GET', 'k')).toBe('v');
      expect(await node.call('GET', 'missing')).toBeNull();
      const err = await node.call('NOSUCHCOMMAND');
      expect(err).toBeInstanceOf(ReplyError);
      expect((err as ReplyError).code).toBe('ERR');
      expect(await node.call('CONFIG', 'GET', 'save')).toEqual(['save', '']);
      expect(await node.call('DEBUG', 'SLEEP', '0')).toBe('OK');
      const info = parseInfo(await node.call('INFO', 'server'));
      expect(info['process_id']).toBe(String(node.pid));
    } finally {
      await node.stop();
    }
    expect(node.alive).toBe(false);
    expect(await waitDead(node.pid)).toBe(true);
    const { existsSync } = await import('node:fs');
    expect(existsSync(node.dir)).toBe(false);
  });

  it('supports a password, zone, extra args, RESP3 and restart', async () => {
    const node = await startStandalone({ password: 's3cret', zone: 'az-1', args: ['--maxclients', '77'] });
    track(node);
    try {
      const anon = await RawClient.connect(node.port);
      expect(await anon.call('GET', 'x')).toBeInstanceOf(ReplyError);
      anon.close();
      const c = await RawClient.connect(node.port, { password: 's3cret' });
      expect(await c.call('CONFIG', 'GET', 'maxclients')).toEqual(['maxclients', '77']);
      expect(parseInfo(await c.call('INFO', 'server'))['availability_zone']).toBe('az-1');
      const hello = await c.call('HELLO', '3');
      expect(hello).toBeInstanceOf(Map);
      expect((hello as Map<unknown, unknown>).get('proto')).toBe(3);
      expect(await c.call('HSET', 'h', 'f', 'v')).toBe(1);
      expect(await c.call('HGETALL', 'h')).toEqual(new Map([['f', 'v']]));
      expect(await c.call('GET', 'nope')).toBeNull();
      c.close();

      const oldPid = node.pid;
      await node.restart();
      track(node);
      expect(node.pid).not.toBe(oldPid);
      expect(await waitDead(oldPid)).toBe(true);
      expect(await node.call('PING')).toBe('PONG');
    } finally {
      await node.stop();
    }
  });
});

describe('cluster 3 primaries + 3 replicas', () => {
  let cluster: ValkeyCluster | undefined;
  afterAll(async () => {
    await cluster?.stop();
  });

  it('creates a stable cluster with zones, survives a primary kill, rejoins the restarted node', async () => {
    const t0 = Date.now();
    const zones = ['az-a', 'az-b', 'az-c'];
    cluster = await startCluster({ primaries: 3, replicasPerPrimary: 1, zones, nodeTimeoutMs: 2000 });
    const startMs = Date.now() - t0;
    cluster.nodes.forEach(track);
    expect(cluster.nodes).toHaveLength(6);
    expect(startMs).toBeLessThan(20_000);

    const shards = await cluster.shards();
    expect(shards).toHaveLength(3);
    expect(shards.every((s) => s.replicas.length === 1)).toBe(true);
    expect(shards.flatMap((s) => s.slots).reduce((n, [a, b]) => n + b - a + 1, 0)).toBe(CLUSTER_SLOTS);
    expect(await cluster.primaries()).toHaveLength(3);
    expect(await cluster.replicas()).toHaveLength(3);
    // At creation the first three nodes are the primaries.
    expect((await cluster.primaries()).map((n) => n.port).sort()).toEqual(cluster.nodes.slice(0, 3).map((n) => n.port).sort());

    // Every node agrees on CLUSTER SLOTS.
    const slotViews = await Promise.all(
      cluster.nodes.map(async (n) => {
        const r = (await cluster!.call(n, 'CLUSTER', 'SLOTS')) as unknown[][];
        return JSON.stringify(r.map((e) => [e[0], e[1], (e[2] as unknown[])[1]]).sort((a, b) => Number(a[0]) - Number(b[0])));
      }),
    );
    expect(new Set(slotViews).size).toBe(1);

    // Zones in node order, cycled.
    for (const [i, n] of cluster.nodes.entries()) {
      expect(n.zone).toBe(zones[i % 3]);
      expect(parseInfo(await cluster.call(n, 'INFO', 'server'))['availability_zone']).toBe(zones[i % 3]);
    }

    // Zones can be rearranged by live role (valkey-cli's replica placement is not deterministic).
    const r0 = shards[0]!.replicas[0]!;
    await r0.setZone(shards[0]!.primary.zone!);
    expect(r0.zone).toBe(shards[0]!.primary.zone);
    expect(parseInfo(await r0.call('INFO', 'server'))['availability_zone']).toBe(shards[0]!.primary.zone);

    // A write reaches the replica.
    const p0 = await cluster.primaryForSlot(0);
    expect(cluster.nodeFor(p0.port)).toBe(p0);
    // "{06S}" hashes to slot 0.
    // WAIT counts this connection's writes, so SET and WAIT share one (cluster.call opens a fresh one each time).
    const writer = await RawClient.connect(p0.port);
    expect(await writer.call('SET', '{06S}k', 'v')).toBe('OK');
    expect(await writer.call('WAIT', 1, 5000)).toBe(1); // replicated before we kill p0
    writer.close();
    const moved = await cluster.call((await cluster.primaryForSlot(16383)), 'GET', '{06S}k');
    expect(moved).toBeInstanceOf(ReplyError);
    expect((moved as ReplyError).code).toBe('MOVED');

    // Kill the primary of slot 0: its replica takes over within a bounded time.
    const victim = p0;
    const replicaOfVictim = shards.find((s) => s.primary === victim)!.replicas[0]!;
    const tKill = Date.now();
    await cluster.killNode(victim);
    expect(victim.alive).toBe(false);
    expect(await waitDead(victim.pid, 1000)).toBe(true);
    await cluster.waitForStable({ timeoutMs: 15_000 });
    const failoverMs = Date.now() - tKill;
    expect(failoverMs).toBeLessThan(15_000);
    expect((await cluster.primaryForSlot(0)).port).toBe(replicaOfVictim.port);
    expect(await cluster.primaries()).toHaveLength(3);
    expect(await cluster.replicas()).toHaveLength(2);
    expect(await cluster.call(replicaOfVictim, 'GET', '{06S}k')).toBe('v');

    // Restart the old primary: it rejoins as a replica of the new one.
    await cluster.restartNode(victim);
    track(victim);
    await cluster.waitForStable({ timeoutMs: 20_000 });
    const s0 = (await cluster.shards()).find((s) => s.primary.port === replicaOfVictim.port)!;
    expect(s0.replicas.map((n) => n.port)).toEqual([victim.port]);
    expect(await cluster.replicas()).toHaveLength(3);

    // Manual failover back.
    await cluster.failover(victim);
    expect((await cluster.primaryForSlot(0)).port).toBe(victim.port);

    await cluster.flushAll();
    expect(await cluster.call(victim, 'DBSIZE')).toBe(0);

    const allPids = cluster.nodes.map((n) => n.pid);
    const dirs = cluster.nodes.map((n) => n.dir);
    await cluster.stop();
    for (const pid of allPids) expect(await waitDead(pid)).toBe(true);
    const { existsSync } = await import('node:fs');
    for (const d of dirs) expect(existsSync(d)).toBe(false);
    console.log(`cluster start ${startMs} ms, failover ${failoverMs} ms`);
  });

  it('creates a 1-primary cluster by hand (valkey-cli needs >= 3)', async () => {
    const small = await startCluster({ primaries: 1, replicasPerPrimary: 1 });
    small.nodes.forEach(track);
    try {
      const shards = await small.shards();
      expect(shards).toHaveLength(1);
      expect(shards[0]!.slots).toEqual([[0, 16383]]);
      expect(shards[0]!.replicas).toHaveLength(1);
    } finally {
      await small.stop();
    }
  });
});
