import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Valkey } from 'iovalkey';
import { startCluster, type ValkeyCluster, type ValkeyNode } from '../harness/valkey-processes.js';
import { ReplyError, parseInfo } from '../harness/raw-client.js';
import type { RespoolProxy } from '../../src/server.js';
import type { HotKeysConfig } from '../../src/config/types.js';
import { DEFAULT_HOT_KEYS } from '../../src/config/hot-keys-config.js';
import { clientFor, startTestProxy } from '../helpers/proxy.js';
import { waitFor } from '../helpers/wait.js';

// Split copies against a real 3-primary cluster (1 replica each, for the failover case).

const addr = (n: ValkeyNode) => `${n.host}:${n.port}`;

function hotKeysConfig(overrides: Partial<HotKeysConfig> = {}): HotKeysConfig {
  return { ...structuredClone(DEFAULT_HOT_KEYS), ...overrides };
}

describe('split copies on a 3-primary cluster', () => {
  let cluster: ValkeyCluster;
  let proxy: RespoolProxy;
  let client: Valkey;

  /** The copies of a split key as the proxy placed them: [name, slot, node] with node from the cluster itself. */
  async function copiesOf(key: string): Promise<Array<{ name: string; slot: number; node: ValkeyNode }>> {
    await proxy.hotKeys.settled();
    const split = proxy.hotKeys.splitKey(key);
    expect(split, `split key ${key}`).toBeDefined();
    return Promise.all(split!.active.map(async (c) => ({
      name: c.name.toString(), slot: c.slot, node: await cluster.primaryForSlot(c.slot),
    })));
  }

  /** Each copy's value, read directly from the node owning it. */
  async function directValues(key: string, ...cmd: string[]): Promise<unknown[]> {
    const copies = await copiesOf(key);
    return Promise.all(copies.map((c) => cluster.call(c.node, ...(cmd.length ? [cmd[0]!, c.name, ...cmd.slice(1)] : ['GET', c.name]))));
  }

  function perNodeCounts(copies: Array<{ node: ValkeyNode }>): number[] {
    const counts = new Map<string, number>();
    for (const c of copies) counts.set(addr(c.node), (counts.get(addr(c.node)) ?? 0) + 1);
    return [...counts.values()].sort();
  }

  beforeAll(async () => {
    cluster = await startCluster({ primaries: 3, replicasPerPrimary: 1, nodeTimeoutMs: 2000 });
    const seeds = cluster.nodes.slice(0, 2).map((n) => ({ host: n.host, port: n.port }));
    proxy = await startTestProxy(seeds, {
      admin: { host: '127.0.0.1', port: 0 },
      adminToken: 'test-admin-token-0123456789', // admin POST/DELETE need it
      cluster: { refreshMinIntervalMs: 100 },
      hotKeys: hotKeysConfig({ split: [{ key: 'hot:3', copies: 3 }, { key: 'hot:6', copies: 6 }] }),
    } as never);
    client = clientFor(proxy);
  }, 60_000);

  afterAll(async () => {
    client?.disconnect();
    await proxy?.close();
    await cluster?.stop();
  });

  it('places N=3 copies one per primary and N=6 copies two per primary', async () => {
    const three = await copiesOf('hot:3');
    expect(three).toHaveLength(3);
    expect(three[0]!.name).toBe('hot:3'); // the original is copy 0
    expect(perNodeCounts(three)).toEqual([1, 1, 1]);
    const six = await copiesOf('hot:6');
    expect(six).toHaveLength(6);
    expect(perNodeCounts(six)).toEqual([2, 2, 2]);
    expect(new Set(six.map((c) => c.name)).size).toBe(6);
  });

  it('writes reach every copy and reads return the written value from every copy', async () => {
    expect(await client.set('hot:3', 'v1')).toBe('OK');
    expect(await directValues('hot:3')).toEqual(['v1', 'v1', 'v1']);
    // Every read is served by some copy; round-robin visits all of them.
    const before = proxy.hotKeys.stats.reads;
    for (let i = 0; i < 12; i++) expect(await client.get('hot:3')).toBe('v1');
    expect(proxy.hotKeys.stats.reads - before).toBe(12);
    // SET with options, APPEND, INCR, EXPIRE family, hashes, DEL.
    expect(await client.set('hot:6', '10', 'EX', 100, 'GET')).toBe(null);
    expect(await directValues('hot:6')).toEqual(Array(6).fill('10'));
    expect(await client.incrby('hot:6', 5)).toBe(15);
    expect(await directValues('hot:6')).toEqual(Array(6).fill('15'));
    const ttls = (await directValues('hot:6', 'TTL')) as number[];
    for (const t of ttls) expect(t).toBeGreaterThan(90);
    expect(await client.persist('hot:6')).toBe(1);
    expect(await directValues('hot:6', 'TTL')).toEqual(Array(6).fill(-1));
    expect(await client.pexpire('hot:6', 100_000)).toBe(1);
    expect(await client.del('hot:6')).toBe(1);
    expect(await directValues('hot:6', 'EXISTS')).toEqual(Array(6).fill(0));
    for (let i = 0; i < 6; i++) expect(await client.get('hot:6')).toBe(null);
    expect(await client.hset('hot:6', 'a', '1', 'b', '2')).toBe(2);
    expect(await client.hincrby('hot:6', 'a', 10)).toBe(11);
    expect(await directValues('hot:6', 'HGET', 'a')).toEqual(Array(6).fill('11'));
    for (let i = 0; i < 6; i++) {
      expect(await client.hget('hot:6', 'b')).toBe('2');
      expect(await client.hgetall('hot:6')).toEqual({ a: '11', b: '2' });
      expect(await client.hlen('hot:6')).toBe(2);
    }
    expect(await client.unlink('hot:6')).toBe(1);
  });

  it('a missing copy falls back to the original (never a false nil) and is repaired', async () => {
    await client.set('hot:3', 'survivor');
    const copies = await copiesOf('hot:3');
    const victim = copies[1]!;
    expect(await cluster.call(victim.node, 'DEL', victim.name)).toBe(1);
    const fallbacks = proxy.hotKeys.stats.fallbacks;
    for (let i = 0; i < 9; i++) expect(await client.get('hot:3')).toBe('survivor');
    expect(proxy.hotKeys.stats.fallbacks).toBeGreaterThan(fallbacks);
    await proxy.hotKeys.settled();
    expect(await cluster.call(victim.node, 'GET', victim.name)).toBe('survivor');
  });

  it('a write that fails on some copies is an error, counted, and the copies are repaired', async () => {
    await client.set('hot:3', '1');
    const copies = await copiesOf('hot:3');
    await cluster.call(copies[2]!.node, 'SET', copies[2]!.name, 'not-a-number');
    await expect(client.incr('hot:3')).rejects.toThrow(/split key 'hot:3' failed on 1 of 3 copies/);
    const metrics = await proxy.metrics.render();
    expect(metrics).toMatch(/respool_split_writes_total\{outcome="partial_failure"\} [1-9]/);
    await proxy.hotKeys.settled();
    expect(await directValues('hot:3')).toEqual(['2', '2', '2']);
    // A write every copy refuses is the server's own error, not a partial failure.
    await client.hset('hot:6', 'f', 'v');
    await expect(client.incr('hot:6')).rejects.toThrow(/WRONGTYPE/);
    await client.del('hot:6');
  });

  it('scripts, multi-key writes and transactions on a split key get an error naming the key', async () => {
    await expect(client.eval("return redis.call('GET', KEYS[1])", 1, 'hot:3')).rejects.toThrow(/EVAL cannot be applied to split key 'hot:3'/);
    await expect(client.rename('hot:3', '{hot:3}x')).rejects.toThrow(/CROSSSLOT|split key 'hot:3'/);
    await expect(client.call('COPY', 'hot:3', 'hot:3-other')).rejects.toThrow(/CROSSSLOT|split key 'hot:3'/);
    await expect(client.call('SPOP', 'hot:3')).rejects.toThrow(/split key 'hot:3'/);
    // inside MULTI the command is refused at queue time, so EXEC aborts (nothing ran)
    const tx = await client.multi().set('hot:3', 'tx').exec().catch((e: Error) => e);
    expect(String(tx)).toMatch(/EXECABORT/);
    expect(await client.call('MULTI')).toBe('OK');
    await expect(client.call('SET', 'hot:3', 'tx')).rejects.toThrow(/SET cannot be applied to split key 'hot:3': a transaction runs on one node/);
    expect(await client.call('DISCARD')).toBe('OK');
  });

  it('spreads GETs of a hot key evenly over the primaries (INFO commandstats within ±10%)', async () => {
    await client.set('hot:3', 'x'.repeat(100));
    for (let i = 0; i < 50; i++) await client.set(`cold:${i}`, 'c');
    const primaries = await cluster.primaries();
    for (const p of primaries) await cluster.call(p, 'CONFIG', 'RESETSTAT');
    const total = 6000;
    for (let batch = 0; batch < total / 500; batch++) {
      const pipe = client.pipeline();
      for (let i = 0; i < 500; i++) {
        // ~90% on the hot key, the rest uniform over 50 cold keys
        if (i % 10 !== 0) pipe.get('hot:3');
        else pipe.get(`cold:${(batch * 50 + i / 10) % 50}`);
      }
      await pipe.exec();
    }
    const gets = await Promise.all(primaries.map(async (p) => {
      const info = parseInfo(await cluster.call(p, 'INFO', 'commandstats'));
      return Number(/calls=(\d+)/.exec(info['cmdstat_get'] ?? '')?.[1] ?? 0);
    }));
    const sum = gets.reduce((a, b) => a + b, 0);
    expect(sum).toBeGreaterThanOrEqual(total);
    for (const g of gets) expect(Math.abs(g / sum - 1 / 3)).toBeLessThanOrEqual(0.1 / 3);
  });

  const AUTH = { authorization: 'Bearer test-admin-token-0123456789' };
  it('adds and removes split keys at run time through the admin API (copies deleted, original kept)', async () => {
    const base = `http://127.0.0.1:${proxy.adminAddress!.port}`;
    await client.set('runtime:key', 'rv');
    const add = await fetch(`${base}/hotkeys/split`, { method: 'POST', headers: AUTH, body: JSON.stringify({ key: 'runtime:key', copies: 3 }) });
    expect(add.status).toBe(200);
    const copies = await copiesOf('runtime:key');
    expect(perNodeCounts(copies)).toEqual([1, 1, 1]);
    expect(await directValues('runtime:key')).toEqual(['rv', 'rv', 'rv']);
    const report = (await (await fetch(`${base}/hotkeys`)).json()) as { split: { keys: Array<{ key: string }> } };
    expect(report.split.keys.map((k) => k.key)).toContain('runtime:key');
    const bad = await fetch(`${base}/hotkeys/split`, { method: 'POST', headers: AUTH, body: JSON.stringify({ key: 'x', copies: 0 }) });
    expect(bad.status).toBe(400);
    const del = await fetch(`${base}/hotkeys/split?key=runtime:key`, { method: 'DELETE', headers: AUTH });
    expect(del.status).toBe(200);
    for (const c of copies.slice(1)) expect(await cluster.call(c.node, 'EXISTS', c.name)).toBe(0);
    expect(await client.get('runtime:key')).toBe('rv');
    expect(proxy.hotKeys.splitKey('runtime:key')).toBeUndefined();
    expect((await fetch(`${base}/hotkeys/split?key=runtime:key`, { method: 'DELETE', headers: AUTH })).status).toBe(404);
  });

  it('answers the RESPOOL command (SPLIT ADD/LIST/DEL) for valkey-cli users', async () => {
    await client.set('cli:key', 'cv');
    expect(await client.call('RESPOOL', 'SPLIT', 'ADD', 'cli:key', '3')).toBe('OK');
    const copies = await copiesOf('cli:key');
    expect(perNodeCounts(copies)).toEqual([1, 1, 1]);
    const list = (await client.call('RESPOOL', 'SPLIT', 'LIST')) as Array<[string, string[]]>;
    expect(list.find((e) => e[0] === 'cli:key')![1]).toHaveLength(3);
    expect(await client.call('RESPOOL', 'SPLIT', 'DEL', 'cli:key')).toBe(1);
    await proxy.hotKeys.settled();
    for (const c of copies.slice(1)) expect(await cluster.call(c.node, 'EXISTS', c.name)).toBe(0);
    expect(await client.get('cli:key')).toBe('cv');
    await expect(client.call('RESPOOL', 'NOPE')).rejects.toThrow(/unknown subcommand/);
  });

  it('re-places and repairs copies after a slot migration', async () => {
    await client.set('hot:3', 'before-migration');
    const copies = await copiesOf('hot:3');
    // Move the slot of copy 1 to the primary that holds copy 2: two copies now share a primary.
    const moving = copies[1]!;
    const target = copies[2]!.node;
    const [sourceId, targetId] = await Promise.all([moving.node, target].map(async (n) => String(await cluster.call(n, 'CLUSTER', 'MYID'))));
    await cluster.call(target, 'CLUSTER', 'SETSLOT', moving.slot, 'IMPORTING', sourceId!);
    await cluster.call(moving.node, 'CLUSTER', 'SETSLOT', moving.slot, 'MIGRATING', targetId!);
    const r = await cluster.call(moving.node, 'MIGRATE', target.host, target.port, '', 0, 5000, 'KEYS', moving.name);
    expect(r).not.toBeInstanceOf(ReplyError);
    for (const n of await cluster.primaries()) await cluster.call(n, 'CLUSTER', 'SETSLOT', moving.slot, 'NODE', targetId!);
    await cluster.waitForStable();
    proxy.refresher.requestRefresh('error');
    await waitFor(async () => {
      const now = await copiesOf('hot:3');
      return perNodeCounts(now).join() === '1,1,1';
    }, 'one copy per primary after the migration', 15_000, 100);
    const after = await copiesOf('hot:3');
    // One of the two copies that now shared a primary was given up for a new name elsewhere.
    const retired = copies.filter((c) => !after.some((a) => a.name === c.name));
    expect(retired).toHaveLength(1);
    expect([moving.name, copies[2]!.name]).toContain(retired[0]!.name);
    expect(await directValues('hot:3')).toEqual(Array(3).fill('before-migration'));
    for (let i = 0; i < 6; i++) expect(await client.get('hot:3')).toBe('before-migration');
    // The retired copy was deleted (both now live on the target).
    expect(await cluster.call(target, 'EXISTS', retired[0]!.name)).toBe(0);
  });

  it('follows a failover: copies stay one per primary, repaired, readable', async () => {
    await client.set('hot:3', 'before-failover');
    const copies = await copiesOf('hot:3');
    const shards = await cluster.shards();
    const shard = shards.find((s) => addr(s.primary) === addr(copies[1]!.node))!;
    await cluster.failover(shard.replicas[0]!);
    proxy.refresher.requestRefresh('error');
    const promoted = addr(shard.replicas[0]!);
    await waitFor(async () => {
      await proxy.hotKeys.settled();
      const now = proxy.hotKeys.splitKey('hot:3')!.active.map((c) => c.node);
      return now.includes(promoted);
    }, 'a copy on the promoted replica', 15_000, 100);
    const after = await copiesOf('hot:3');
    expect(perNodeCounts(after)).toEqual([1, 1, 1]);
    expect(await directValues('hot:3')).toEqual(Array(3).fill('before-failover'));
    for (let i = 0; i < 6; i++) expect(await client.get('hot:3')).toBe('before-failover');
    expect(await client.set('hot:3', 'after-failover')).toBe('OK');
    expect(await directValues('hot:3')).toEqual(Array(3).fill('after-failover'));
  });
});

