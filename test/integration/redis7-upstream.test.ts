/**
 * respool in front of Redis 7 (redis-server 7.0) instead of Valkey 8: a standalone server and a
 * 3-primary + 3-replica cluster, each started once for the file. Where the point is exact bytes,
 * respool's replies are compared with what the standalone redis-server answers itself (the
 * oracle, as one-server.ts uses a standalone valkey-server for the cluster).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import calculateSlot from 'cluster-key-slot';
import type { Valkey } from 'iovalkey';
import { startCluster, startStandalone, type ValkeyCluster, type ValkeyNode } from '../harness/valkey-processes.js';
import { parseInfo, RawClient, ReplyError, type RespReply } from '../harness/raw-client.js';
import type { RespoolProxy } from '../../src/server.js';
import { clientFor, startTestProxy } from '../helpers/proxy.js';
import { exerciseDataTypes } from '../helpers/data-types.js';
import { RawConnection } from '../helpers/raw-resp.js';
import { connect, transcript, type Step } from '../helpers/transcript.js';
import { sleep, waitFor } from '../helpers/wait.js';

const REDIS_VERSION = '7.0.15';
const PROTOCOLS = [2, 3] as const;

/** Steps on connection 0. */
const on0 = (...commands: Array<Array<string | number>>): Step[] => commands.map((c): Step => [0, ...c]);

/**
 * Commands Valkey 8.0 has and Redis 7.0 lacks (COMMAND of each, compared): through respool they
 * must get redis-server's own errors, since respool learns its command table from the upstream.
 */
const VALKEY_ONLY = on0(
  ['WAITAOF', 0, 0, 0],
  ['CLIENT', 'SETINFO', 'lib-name', 'app'],
  ['CLIENT', 'NO-TOUCH', 'on'],
  ['CLIENT', 'CAPA', 'redirect'],
  ['CLUSTER', 'MYSHARDID'],
  ['CLUSTER', 'SLOT-STATS', 'SLOTSRANGE', 0, 1],
  ['SCRIPT', 'SHOW', '0000000000000000000000000000000000000000'],
  ['NOSUCHCOMMAND', 'x'],
  ['GET'],
  ['COMMAND', 'COUNT'],
  ['COMMAND', 'INFO', 'waitaof', 'get'],
);

/**
 * Commands whose keys are not (only) at position 1, located by Redis 7's key specs (numkeys,
 * keywords, subcommands, SORT's native STORE), over keys of one slot each (a hash tag).
 */
function keySpecSteps(tag: string): Step[] {
  const k = (name: string) => `{${tag}}${name}`;
  return on0(
    ['EVAL', "return redis.call('SET', KEYS[1], ARGV[1])", 1, k('e'), 'by-eval'],
    ['EVAL_RO', "return redis.call('GET', KEYS[1])", 1, k('e')],
    ['ZADD', k('z1'), 1, 'a', 2, 'b'],
    ['ZADD', k('z2'), 3, 'b', 4, 'c'],
    ['ZUNIONSTORE', k('zu'), 2, k('z1'), k('z2')],
    ['ZINTERCARD', 2, k('z1'), k('z2')],
    ['ZRANGE', k('zu'), 0, -1, 'WITHSCORES'],
    ['XADD', k('s'), '1-1', 'f', 'v'],
    ['XREAD', 'COUNT', 5, 'STREAMS', k('s'), '0'],
    ['RPUSH', k('l'), 3, 1, 2],
    ['SORT', k('l'), 'STORE', k('sorted')],
    ['LRANGE', k('sorted'), 0, -1],
    ['LMPOP', 2, k('none'), k('sorted'), 'LEFT', 'COUNT', 2],
    ['OBJECT', 'ENCODING', k('l')],
    ['SET', k('b1'), 'a'],
    ['BITOP', 'OR', k('bo'), k('b1'), k('e')],
    ['GET', k('bo')],
    ['GET', k('e')],
  );
}

/** Multi-key commands over keys in several slots (split by slot in the cluster). */
const MULTI_KEY = on0(
  ['MSET', 'a', '1', 'b', '2', 'c', '3', '{a}x', '4'],
  ['MGET', 'c', 'a', 'nothing', 'b', '{a}x', 'a'],
  ['EXISTS', 'a', 'b', 'c', 'nothing', 'a'],
  ['TOUCH', 'a', 'b', 'nothing'],
  ['DEL', 'a', 'b', 'nothing'],
  ['UNLINK', 'c', '{a}x'],
  ['MGET', 'a', 'b', 'c'],
);

/** Reads over several slots (run on copies: DUMP / RESTORE between Redis nodes) and blocking pops over several slots. */
const CROSS_SLOT_READS = on0(
  ['SADD', 'a', '1', '2'],
  ['SADD', 'b', '2', '3'],
  ['SUNION', 'a', 'b', 'c'],
  ['SINTERCARD', 2, 'a', 'b'],
  ['SINTERSTORE', 'c', 'a', 'b'],
  ['SMEMBERS', 'c'],
  ['PFADD', 'h1', 'x'],
  ['PFADD', 'h2', 'y'],
  ['PFCOUNT', 'h1', 'h2'],
  ['RPUSH', 'lb', 'x'],
  ['BLPOP', 'la', 'lb', 1],
  ['BLPOP', 'la', 'lb', 0.1],
  ['XADD', 'sa', '1-1', 'f', 'v'],
  ['XADD', 'sb', '1-2', 'g', 'w'],
  ['XREAD', 'COUNT', 1, 'STREAMS', 'sa', 'sb', '0', '0'],
);

/** Transactions over one slot and over several (`a`, `b`, `c` are on three primaries). */
const TRANSACTIONS = on0(
  ['MULTI'],
  ['SET', '{t}x', '1'],
  ['INCR', '{t}x'],
  ['HSET', '{t}h', 'f', 'v'],
  ['HGETALL', '{t}h'],
  ['EXEC'],
  ['MULTI'],
  ['SET', 'a', 'text'],
  ['INCR', 'a'],
  ['SADD', 'b', 'x'],
  ['ZADD', 'c', '1.5', 'm'],
  ['ZSCORE', 'c', 'm'],
  ['MGET', 'a', 'b', 'nothing'],
  ['EXEC'],
  ['MULTI'],
  ['SET', 'a', '1'],
  ['NOSUCHCOMMAND'],
  ['EXEC'],
  ['GET', 'a'],
);

/** Replies of each RESP3 type (map, set, double, null, nested array) a HELLO 3 client gets. */
const REPLY_TYPES = on0(
  ['HSET', 'h', 'f', '1', 'g', '2'],
  ['HGETALL', 'h'],
  ['SADD', 's', 'only'],
  ['SMEMBERS', 's'],
  ['ZADD', 'z', '2.5', 'm'],
  ['ZSCORE', 'z', 'm'],
  ['ZRANGE', 'z', 0, -1, 'WITHSCORES'],
  ['GET', 'missing'],
  ['LPOP', 'missing', 2],
  ['INCRBYFLOAT', 'n', '1.5'],
  ['EVAL', 'return {1, "two", {3}}', 0],
  ['LPOS', 'missing', 'x'],
  ['CONFIG', 'GET', 'maxmemory-policy'],
);

/** respool's moved-redirect count (respool_redirects_total{type="moved"}). */
async function movedRedirects(proxy: RespoolProxy): Promise<number> {
  const m = /^respool_redirects_total\{type="moved"\} (\d+)/m.exec(await proxy.metrics.render());
  return m ? Number(m[1]) : 0;
}

/**
 * Waits until respool has replaced its built-in (Valkey 8) command table by the one learned from
 * the upstream's COMMAND (asynchronous, after discovery): CLIENT SETINFO, answered by respool
 * while the built-in table has it, is then unknown and goes to Redis 7.0, which lacks it.
 */
async function learnedCommandTable(proxy: RespoolProxy): Promise<void> {
  const c = await RawConnection.connect(proxy.address.port);
  try {
    await waitFor(async () => (await c.call('CLIENT', 'SETINFO', 'lib-name', 'probe')) !== '+OK\r\n', "the upstream's command table", 5000);
  } finally {
    c.close();
  }
}

/** HELLO's reply as a record (RESP2 flat array or RESP3 map). */
function helloFields(reply: RespReply): Record<string, RespReply> {
  if (reply instanceof Map) return Object.fromEntries([...reply].map(([k, v]) => [String(k), v]));
  const flat = reply as RespReply[];
  const out: Record<string, RespReply> = {};
  for (let i = 0; i + 1 < flat.length; i += 2) out[String(flat[i])] = flat[i + 1]!;
  return out;
}

/** One subscriber's frames (SUBSCRIBE, PSUBSCRIBE, SSUBSCRIBE and a message of each) and the publisher's counts. */
async function pubsubFrames(port: number, proto: 2 | 3): Promise<string[]> {
  const sub = await connect(port, proto);
  const pub = await connect(port, proto);
  const out: string[] = [];
  try {
    out.push(await sub.call('SUBSCRIBE', 'news'));
    out.push(await sub.call('PSUBSCRIBE', 'n*'));
    out.push(await sub.call('SSUBSCRIBE', 'shard-news'));
    out.push(await pub.call('PUBLISH', 'news', 'hello'));
    out.push(await sub.read(), await sub.read()); // message, then pmessage
    out.push(await pub.call('SPUBLISH', 'shard-news', 'sharded'));
    out.push(await sub.read());
    out.push(await sub.call('UNSUBSCRIBE', 'news'));
    return out;
  } finally {
    sub.close();
    pub.close();
  }
}

describe('respool in front of Redis 7', () => {
  let standalone: ValkeyNode;
  let cluster: ValkeyCluster;
  let sp: RespoolProxy; // respool in front of the standalone server
  let cp: RespoolProxy; // respool in front of the cluster
  let sc: Valkey;
  let cc: Valkey;

  /** `steps` directly on the standalone redis-server and through `proxy`, every side flushed first. */
  async function bothSides(proxy: RespoolProxy, proto: 2 | 3, steps: Step[]): Promise<{ expected: string[]; actual: string[] }> {
    await Promise.all([cluster.flushAll(), standalone.call('FLUSHALL')]);
    const expected = await transcript(standalone.port, proto, steps);
    await Promise.all([cluster.flushAll(), standalone.call('FLUSHALL')]);
    const actual = await transcript(proxy.address.port, proto, steps);
    return { expected, actual };
  }

  beforeAll(async () => {
    [standalone, cluster] = await Promise.all([startStandalone({ server: 'redis' }), startCluster({ server: 'redis', primaries: 3, replicasPerPrimary: 1 })]);
    const seed = cluster.nodes[0]!;
    [sp, cp] = await Promise.all([
      startTestProxy([{ host: standalone.host, port: standalone.port }]),
      startTestProxy([{ host: seed.host, port: seed.port }], { cluster: { refreshMinIntervalMs: 200 } }),
    ]);
    await Promise.all([learnedCommandTable(sp), learnedCommandTable(cp)]);
    sc = clientFor(sp);
    cc = clientFor(cp);
  }, 30_000);

  afterAll(async () => {
    sc?.disconnect();
    cc?.disconnect();
    await Promise.all([sp?.close(), cp?.close()]);
    await Promise.all([standalone?.stop(), cluster?.stop()]);
  });

  it('the harness refuses availability-zone for redis-server (Valkey-only)', async () => {
    await expect(startStandalone({ server: 'redis', zone: 'az-1' })).rejects.toThrow(/availability-zone is Valkey-only/);
    await expect(startCluster({ server: 'redis', zones: ['az-1'] })).rejects.toThrow(/availability-zone is Valkey-only/);
    expect(standalone.server).toBe('redis');
    expect(parseInfo(await standalone.call('INFO', 'server'))['redis_version']).toBe(REDIS_VERSION);
  });

  describe('standalone redis-server', () => {
    it('discovers standalone mode; HELLO and INFO server name Redis and its version, as redis-server does', async () => {
      expect(sp.refresher.current?.mode).toBe('standalone');
      expect(sp.refresher.current?.shards[0]?.primary.zone).toBeNull(); // Redis has no availability_zone
      for (const proto of PROTOCOLS) {
        const direct = await RawClient.connect(standalone.port);
        const via = await RawClient.connect(sp.address.port);
        try {
          const theirs = helloFields(await direct.call('HELLO', proto));
          const ours = helloFields(await via.call('HELLO', proto));
          expect(theirs['server']).toBe('redis');
          expect(theirs['version']).toBe(REDIS_VERSION);
          for (const field of ['server', 'version', 'proto', 'mode', 'role']) expect(ours[field], field).toEqual(theirs[field]);
          expect(ours['proxy']).toBe('respool');
        } finally {
          direct.close();
          via.close();
        }
      }
      const info = parseInfo(await sc.info('server'));
      expect(info['redis_version']).toBe(REDIS_VERSION);
      // Redis 7 has no server_name / valkey_version: respool must not claim a Valkey upstream.
      expect(info['server_name']).toBeUndefined();
      expect(info['valkey_version']).toBeUndefined();
      expect(info['upstream_mode']).toBe('standalone');
    });

    it("Valkey-only commands get redis-server's own errors; COMMAND is Redis 7's (RESP2, RESP3)", async () => {
      for (const proto of PROTOCOLS) {
        const { expected, actual } = await bothSides(sp, proto, VALKEY_ONLY);
        expect(actual).toEqual(expected);
      }
      expect(await sc.call('COMMAND', 'COUNT')).toBe(await standalone.call('COMMAND', 'COUNT'));
      // SLOWLOG and COMMANDLOG are respool's own logs (handlers/observe.ts), whatever the upstream has.
      expect(await standalone.call('COMMANDLOG', 'LEN', 'slow')).toBeInstanceOf(ReplyError);
      expect(await sc.call('COMMANDLOG', 'LEN', 'slow')).toBeTypeOf('number');
    });

    it('serves single-key commands of every data type', async () => {
      await exerciseDataTypes(sc, 'r7');
    });

    it('answers key-spec commands, transactions and every reply type as redis-server does (RESP2, RESP3)', async () => {
      for (const proto of PROTOCOLS) {
        for (const steps of [keySpecSteps('s'), MULTI_KEY, TRANSACTIONS, REPLY_TYPES]) {
          const { expected, actual } = await bothSides(sp, proto, steps);
          expect(actual).toEqual(expected);
        }
      }
    });

    it('pub/sub (classic, pattern, sharded) with the same frames as redis-server (RESP2, RESP3)', async () => {
      for (const proto of PROTOCOLS) expect(await pubsubFrames(sp.address.port, proto)).toEqual(await pubsubFrames(standalone.port, proto));
    });

    it("a redis-server given REPLICAOF respool loads Redis 7's snapshot (relayed byte for byte) and follows the stream", async () => {
      await standalone.call('FLUSHALL');
      expect(await sc.set('repl:before', 'snapshot')).toBe('OK');
      const replica = await startStandalone({ server: 'redis' });
      try {
        expect(await replica.call('REPLICAOF', '127.0.0.1', sp.address.port)).toBe('OK');
        await waitFor(async () => /master_link_status:up/.test(String(await replica.call('INFO', 'replication'))), 'the replica link', 10_000, 50);
        expect(await replica.call('GET', 'repl:before')).toBe('snapshot');
        expect(await sc.hset('repl:after', 'f', 'stream')).toBe(1);
        await waitFor(async () => (await replica.call('HGET', 'repl:after', 'f')) === 'stream', 'the write to reach the replica');
      } finally {
        await replica.stop();
      }
    });
  });

  describe('Redis 7 cluster, 3 primaries with 1 replica each', () => {
    it('discovers the cluster: 3 shards with a replica each, every slot; HELLO and INFO report Redis 7.0.15', async () => {
      const topology = cp.refresher.current!;
      expect(topology.mode).toBe('cluster');
      expect(topology.shards).toHaveLength(3);
      expect(topology.coveredSlots()).toBe(16384);
      for (const shard of topology.shards) expect(shard.replicas).toHaveLength(1);
      expect(topology.allNodes().every((n) => n.zone === null && n.version === REDIS_VERSION)).toBe(true);
      const hello = helloFields((await cc.call('HELLO', '2')) as RespReply);
      expect([hello['server'], hello['version']]).toEqual(['redis', REDIS_VERSION]);
      const info = parseInfo(await cc.info('server'));
      expect([info['redis_version'], info['server_name'], info['upstream_mode']]).toEqual([REDIS_VERSION, undefined, 'cluster']);
    });

    it("Valkey-only commands get redis-server's own errors through the cluster too (RESP2, RESP3)", async () => {
      for (const proto of PROTOCOLS) {
        const { expected, actual } = await bothSides(cp, proto, VALKEY_ONLY);
        expect(actual).toEqual(expected);
      }
    });

    it("routes by Redis 7's key specs: keys not at position 1 reach the slot's owner, no MOVED", async () => {
      const shards = await cluster.shards();
      const owns = (shard: (typeof shards)[number], tag: string) => shard.slots.some(([a, b]) => calculateSlot(tag) >= a && calculateSlot(tag) <= b);
      // One hash tag per primary, so the commands run on each node in turn.
      const tags = shards.map((shard) => {
        let i = 0;
        while (!owns(shard, `ks${i}`)) i++;
        return `ks${i}`;
      });
      const before = await movedRedirects(cp);
      for (const [i, tag] of tags.entries()) {
        const owner = shards[i]!.primary;
        const replies = await transcript(cp.address.port, 2, keySpecSteps(tag));
        expect(replies.filter((r) => r.includes('"-')), replies.join('\n')).toEqual([]);
        expect(await cluster.call(owner, 'GET', `{${tag}}e`)).toBe('by-eval');
        expect(await cluster.call(owner, 'EXISTS', `{${tag}}zu`, `{${tag}}bo`)).toBe(2);
      }
      expect(await movedRedirects(cp)).toBe(before);
      // And the same bytes as one redis-server gives.
      for (const proto of PROTOCOLS) {
        const { expected, actual } = await bothSides(cp, proto, keySpecSteps(tags[0]!));
        expect(actual).toEqual(expected);
      }
    });

    it('multi-key commands, reads and transactions over several slots answer as one redis-server does (RESP2, RESP3)', async () => {
      const owners = new Set(['a', 'b', 'c'].map((k) => cp.refresher.current!.primaryForSlot(calculateSlot(k))!.port));
      expect(owners.size).toBe(3);
      for (const proto of PROTOCOLS) {
        for (const steps of [MULTI_KEY, CROSS_SLOT_READS, TRANSACTIONS, REPLY_TYPES]) {
          const { expected, actual } = await bothSides(cp, proto, steps);
          expect(actual).toEqual(expected);
        }
      }
    });

    it('pub/sub (classic, pattern, sharded) with the same frames as redis-server (RESP2, RESP3)', async () => {
      for (const proto of PROTOCOLS) expect(await pubsubFrames(cp.address.port, proto)).toEqual(await pubsubFrames(standalone.port, proto));
    });

    it('a blocking pop waits for a push from another client; its timeout answers nil', async () => {
      const blocked = clientFor(cp);
      try {
        const popped = blocked.blpop('r7:queue', 5);
        await sleep(100);
        expect(await cc.rpush('r7:queue', 'job-1')).toBe(1);
        expect(await popped).toEqual(['r7:queue', 'job-1']);
        expect(await blocked.blpop('r7:empty', 0.1)).toBeNull();
      } finally {
        blocked.disconnect();
      }
    });

    it('SCAN walks every shard and returns each key once', async () => {
      await cluster.flushAll();
      const keys = Array.from({ length: 300 }, (_, i) => `scan:${i}`);
      await cc.mset(Object.fromEntries(keys.map((k) => [k, 'v'])));
      const seen: string[] = [];
      let cursor = '0';
      do {
        const [next, batch] = (await cc.scan(cursor, 'MATCH', 'scan:*', 'COUNT', 50)) as [string, string[]];
        seen.push(...batch);
        cursor = next;
      } while (cursor !== '0');
      expect(seen.sort()).toEqual([...keys].sort());
      expect(await cc.dbsize()).toBe(300);
    });

    it("serves reads from Redis replicas with reads.strategy preferReplica", async () => {
      const seed = cluster.nodes[0]!;
      const reader = await startTestProxy([{ host: seed.host, port: seed.port }], { reads: { strategy: 'preferReplica' } });
      const c = clientFor(reader);
      try {
        const key = 'replica-read';
        const slot = calculateSlot(key);
        const shard = (await cluster.shards()).find((s) => s.slots.some(([a, b]) => slot >= a && slot <= b))!;
        expect(await c.set(key, 'v')).toBe('OK');
        const getCalls = async () => Number(/^cmdstat_get:calls=(\d+)/m.exec(String(await cluster.call(shard.replicas[0]!, 'INFO', 'commandstats')))?.[1] ?? 0);
        const before = await getCalls();
        let value: string | null = null;
        // Replication is asynchronous: the replica may not have the write yet.
        await waitFor(async () => (value = await c.get(key)) === 'v', 'the replica to have the key');
        expect(value).toBe('v');
        expect(await getCalls()).toBeGreaterThan(before);
      } finally {
        c.disconnect();
        await reader.close();
      }
    });

    it('keeps answering when a slot migrates: follows MOVED and learns the new owner', async () => {
      const key = '{moving}k';
      const slot = calculateSlot(key);
      expect(await cc.set(key, 'before')).toBe('OK');
      const source = await cluster.primaryForSlot(slot);
      const target = (await cluster.primaries()).find((p) => p.port !== source.port)!;
      const [sourceId, targetId] = await Promise.all([source, target].map(async (n) => String(await cluster.call(n, 'CLUSTER', 'MYID'))));
      await cluster.call(target, 'CLUSTER', 'SETSLOT', slot, 'IMPORTING', sourceId);
      await cluster.call(source, 'CLUSTER', 'SETSLOT', slot, 'MIGRATING', targetId);
      expect(await cluster.call(source, 'MIGRATE', target.host, target.port, '', 0, 5000, 'KEYS', key)).toBe('OK');
      for (const node of await cluster.primaries()) await cluster.call(node, 'CLUSTER', 'SETSLOT', slot, 'NODE', targetId);
      const moved = await movedRedirects(cp);
      expect(await cc.get(key)).toBe('before');
      expect(await cc.set(key, 'after')).toBe('OK');
      expect(await cluster.call(target, 'GET', key)).toBe('after');
      expect(await movedRedirects(cp)).toBeGreaterThan(moved);
      await waitFor(() => cp.refresher.current!.primaryForSlot(slot)!.port === target.port, 'the refreshed slot map');
    });
  });
});
