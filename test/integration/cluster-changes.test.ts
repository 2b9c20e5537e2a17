import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Valkey } from 'iovalkey';
import calculateSlot from 'cluster-key-slot';
import { startCluster, type ValkeyCluster, type ValkeyNode } from '../harness/valkey-processes.js';
import type { RespoolProxy } from '../../src/server.js';
import { clientFor, startTestProxy } from '../helpers/proxy.js';

/** Keys that all hash to one slot (a shared hash tag), and that slot. */
function keysInOneSlot(tag: string, n: number): { slot: number; keys: string[] } {
  const keys = Array.from({ length: n }, (_, i) => `{${tag}}:${i}`);
  return { slot: calculateSlot(keys[0]!), keys };
}

async function nodeId(cluster: ValkeyCluster, node: ValkeyNode): Promise<string> {
  return String(await cluster.call(node, 'CLUSTER', 'MYID'));
}

function counter(metrics: string, name: string, label: string): number {
  const match = new RegExp(`^${name}\\{type="${label}"\\} (\\d+)`, 'm').exec(metrics);
  return match ? Number(match[1]) : 0;
}

describe('respool follows a changing cluster', () => {
  let cluster: ValkeyCluster;
  let proxy: RespoolProxy;
  let client: Valkey;

  beforeAll(async () => {
    cluster = await startCluster({ primaries: 3, replicasPerPrimary: 1, nodeTimeoutMs: 2000 });
    const seeds = cluster.nodes.slice(0, 2).map((n) => ({ host: n.host, port: n.port }));
    proxy = await startTestProxy(seeds, { cluster: { refreshMinIntervalMs: 200 } });
    client = clientFor(proxy);
  });

  afterAll(async () => {
    client?.disconnect();
    await proxy?.close();
    await cluster?.stop();
  });

  it('follows ASK during a live slot migration and MOVED after it', async () => {
    const { slot, keys } = keysInOneSlot('migrating', 20);
    for (const [i, k] of keys.entries()) await client.set(k, `v${i}`);
    const source = await cluster.primaryForSlot(slot);
    const target = (await cluster.primaries()).find((p) => p.port !== source.port)!;
    const [sourceId, targetId] = [await nodeId(cluster, source), await nodeId(cluster, target)];

    await cluster.call(target, 'CLUSTER', 'SETSLOT', slot, 'IMPORTING', sourceId);
    await cluster.call(source, 'CLUSTER', 'SETSLOT', slot, 'MIGRATING', targetId);
    // Move half the keys: the source now answers ASK for those.
    const list = '{migrating}:list';
    await client.rpush(list, 'a', 'b');
    const moved = [...keys.slice(0, 10), list];
    await cluster.call(source, 'MIGRATE', target.host, target.port, '', 0, 5000, 'KEYS', ...moved);
    const before = await (await proxy.metrics.render());
    for (const [i, k] of keys.entries()) expect(await client.get(k)).toBe(`v${i}`);
    // A blocking pop on its own lease follows the ASK too (ASKING on the target's lease).
    expect(await client.blpop(list, 1)).toEqual([list, 'a']);
    // A new key in a migrating slot whose keys are partly gone is written on the target via ASK.
    const after = await proxy.metrics.render();
    expect(counter(after, 'respool_redirects_total', 'ask')).toBeGreaterThan(counter(before, 'respool_redirects_total', 'ask'));

    // Finish the migration: the slot now belongs to the target; the source answers MOVED.
    await cluster.call(source, 'MIGRATE', target.host, target.port, '', 0, 5000, 'KEYS', ...keys.slice(10));
    expect(await client.blpop(list, 1)).toEqual([list, 'b']);
    for (const node of await cluster.primaries()) await cluster.call(node, 'CLUSTER', 'SETSLOT', slot, 'NODE', targetId);
    for (const [i, k] of keys.entries()) expect(await client.get(k)).toBe(`v${i}`);
    expect(await client.set(keys[0]!, 'changed')).toBe('OK');
    expect(String(await cluster.call(target, 'GET', keys[0]!))).toBe('changed');
    const final = await proxy.metrics.render();
    expect(counter(final, 'respool_redirects_total', 'moved')).toBeGreaterThan(0);
    // The MOVED reply updated the slot map, and the refresh it triggered agrees.
    await new Promise((r) => setTimeout(r, 500));
    expect(proxy.refresher.current!.primaryForSlot(slot)!.port).toBe(target.port);
  });

  it('serves a shard again after its primary dies and the replica is promoted', async () => {
    const { slot, keys } = keysInOneSlot('failover', 5);
    for (const k of keys) await client.set(k, 'before');
    const victim = await cluster.primaryForSlot(slot);
    // Replication is asynchronous: a write acknowledged just before a SIGKILL may never reach the
    // replica (Valkey's semantics, not respool's). Kill only once the shard's replicas have it.
    const shard = (await cluster.shards()).find((s) => s.primary.port === victim.port)!;
    const offset = async (node: typeof victim) => {
      const info = String(await cluster.call(node, 'INFO', 'replication'));
      return Number(/(?:^|\n)master_repl_offset:(\d+)/.exec(info)?.[1] ?? -1);
    };
    const written = await offset(victim);
    for (const replica of shard.replicas) {
      const since = Date.now();
      while ((await offset(replica)) < written && Date.now() - since < 5000) await new Promise((r) => setTimeout(r, 20));
    }
    await cluster.killNode(victim);

    // Other shards are unaffected meanwhile.
    const other = keysInOneSlot('elsewhere', 1);
    const otherOwner = await cluster.primaryForSlot(other.slot).catch(() => null);
    if (otherOwner && otherOwner.port !== victim.port) expect(await client.set(other.keys[0]!, 'x')).toBe('OK');

    const started = Date.now();
    let value: string | null = null;
    let lastError = '';
    while (Date.now() - started < 30_000) {
      value = await client.get(keys[0]!).catch((e: Error) => ((lastError = `${Date.now() - started} ms: ${e.message}`), null));
      if (value === 'before') break;
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(value, `last error: ${lastError}`).toBe('before');
    const promoted = await cluster.primaryForSlot(slot);
    expect(promoted.port).not.toBe(victim.port);
    expect(await client.set(keys[1]!, 'after')).toBe('OK');
    expect(String(await cluster.call(promoted, 'GET', keys[1]!))).toBe('after');
    expect(proxy.refresher.current!.primaryForSlot(slot)!.port).toBe(promoted.port);
  });
});
