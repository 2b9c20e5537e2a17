/**
 * The near cache (nearcache/near-cache.ts, issue 32): reads of cached keys answered from
 * respool's memory must be byte for byte what one valkey-server answers, in RESP2 and RESP3,
 * standalone and in front of a cluster; a write through any respool instance is never followed by
 * an older value; a write made on a node reaches reads through respool within the invalidation's
 * delivery; the byte bound holds; a lost tracking connection drops what it filled.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Valkey } from 'iovalkey';
import type { RespoolProxy } from '../../src/server.js';
import { startOneServerSides, keysOverNodes, type OneServerSides } from '../helpers/one-server.js';
import { clientFor, startTestProxy } from '../helpers/proxy.js';
import { transcript, type Step } from '../helpers/transcript.js';
import { waitFor } from '../helpers/wait.js';
import { DEFAULT_CONFIG } from '../../src/config/defaults.js';

const NEAR_CACHE = { ...DEFAULT_CONFIG.nearCache, keys: ['c:*'] };

/** Reads of every cached kind, several times (the first fills, the next are answered from memory), around writes of every kind. */
const STEPS: Step[] = [
  [0, 'SET', 'c:a', 'hello'],
  [0, 'GET', 'c:a'], [0, 'GET', 'c:a'], [0, 'GET', 'c:a'],
  [0, 'STRLEN', 'c:a'], [0, 'EXISTS', 'c:a'],
  [0, 'GET', 'c:none'], [0, 'GET', 'c:none'], [0, 'EXISTS', 'c:none'], [0, 'STRLEN', 'c:none'],
  [0, 'SET', 'c:a', 'world'], [0, 'GET', 'c:a'], [0, 'STRLEN', 'c:a'],
  ...([[0, -1], [1, 3], [-3, -1], [-1, -3], [3, 1], [-100, 100], [0, 0], [4, 4], [5, 9], [-5, 2], [2, -100], [-100, -50], ['x', 1], [0, '1.5'], [0, '+1'], [0, '-0'], [0, '99999999999999999999']] as const)
    .map(([a, b]): Step => [0, 'GETRANGE', 'c:a', a, b]),
  [0, 'GETRANGE', 'c:none', 0, -1], [0, 'GETRANGE', 'c:none', 5, 1],
  [0, 'APPEND', 'c:a', '!'], [0, 'GET', 'c:a'],
  [0, 'HSET', 'c:h', 'f', 'v'], [0, 'GET', 'c:h'], [0, 'GET', 'c:h'], [0, 'STRLEN', 'c:h'], [0, 'EXISTS', 'c:h'], [0, 'GETRANGE', 'c:h', 0, 1],
  [0, 'SET', 'c:empty', ''], [0, 'GET', 'c:empty'], [0, 'GETRANGE', 'c:empty', 0, -1], [0, 'GETRANGE', 'c:empty', 0, -1], [0, 'STRLEN', 'c:empty'],
  [0, 'INCR', 'c:n'], [0, 'GET', 'c:n'], [0, 'INCRBY', 'c:n', '41'], [0, 'GET', 'c:n'],
  [0, 'MULTI'], [0, 'SET', 'c:a', 'in-multi'], [0, 'GET', 'c:a'], [0, 'EXEC'], [0, 'GET', 'c:a'],
  [0, 'EVAL', "return redis.call('SET', KEYS[1], 'by-script')", '1', 'c:a'], [0, 'GET', 'c:a'],
  [0, 'SET', 'c:e', 'x', 'PX', '100000'], [0, 'GET', 'c:e'], [0, 'GET', 'c:e'],
  [0, 'DEL', 'c:a'], [0, 'GET', 'c:a'], [0, 'EXISTS', 'c:a'],
  [0, 'SET', 'c:bin', '\u0000\r\n$-1\r\n'], [0, 'GET', 'c:bin'], [0, 'GET', 'c:bin'],
  [0, 'SET', 'c:a', 'again'], [0, 'GET', 'c:a'], [1, 'GET', 'c:a'], [1, 'SET', 'c:a', 'other'], [0, 'GET', 'c:a'],
  [0, 'HSET', 'c:hh', 'a', '1', 'b', '22', 'c', ''], [0, 'HGETALL', 'c:hh'], [0, 'HGETALL', 'c:hh'], [0, 'HGET', 'c:hh', 'b'],
  [0, 'HGET', 'c:hh', 'zz'], [0, 'HMGET', 'c:hh', 'a', 'zz', 'c'], [0, 'HLEN', 'c:hh'], [0, 'HEXISTS', 'c:hh', 'a'],
  [0, 'HEXISTS', 'c:hh', 'zz'], [0, 'HSTRLEN', 'c:hh', 'b'], [0, 'HSTRLEN', 'c:hh', 'zz'], [0, 'GET', 'c:hh'], [0, 'STRLEN', 'c:hh'],
  [0, 'EXISTS', 'c:hh'], [0, 'HINCRBY', 'c:hh', 'a', '5'], [0, 'HGET', 'c:hh', 'a'], [0, 'HDEL', 'c:hh', 'b'], [0, 'HGETALL', 'c:hh'],
  [0, 'HGETALL', 'c:nohash'], [0, 'HGETALL', 'c:nohash'], [0, 'HMGET', 'c:nohash', 'a', 'b'], [0, 'HLEN', 'c:nohash'], [0, 'HGET', 'c:nohash', 'a'],
  [0, 'HSTRLEN', 'c:nohash', 'a'], [0, 'HEXISTS', 'c:nohash', 'a'], [0, 'HGET', 'c:e', 'f'], [0, 'HGETALL', 'c:e'], [0, 'HLEN', 'c:n'],
  [0, 'SADD', 'c:set', 'b', 'a', 'c', '10', '2'], [0, 'SMEMBERS', 'c:set'], [0, 'SMEMBERS', 'c:set'], [0, 'SISMEMBER', 'c:set', 'a'],
  [0, 'SISMEMBER', 'c:set', 'z'], [0, 'SMISMEMBER', 'c:set', 'z', 'c', '10'], [0, 'SCARD', 'c:set'], [0, 'GET', 'c:set'], [0, 'HGET', 'c:set', 'a'],
  [0, 'SREM', 'c:set', 'a'], [0, 'SISMEMBER', 'c:set', 'a'], [0, 'SCARD', 'c:set'], [0, 'SADD', 'c:iset', '3', '1', '2'], [0, 'SMEMBERS', 'c:iset'],
  [0, 'SMEMBERS', 'c:iset'], [0, 'SMEMBERS', 'c:noset'], [0, 'SMEMBERS', 'c:noset'], [0, 'SISMEMBER', 'c:noset', 'a'], [0, 'SMISMEMBER', 'c:noset', 'a', 'b'],
  [0, 'SCARD', 'c:noset'], [0, 'SMEMBERS', 'c:a'], [0, 'SCARD', 'c:hh'],
  [0, 'RPUSH', 'c:list', 'a', 'b', 'c', 'd', 'e'], [0, 'LRANGE', 'c:list', 0, -1], [0, 'LRANGE', 'c:list', 0, -1],
  ...([[1, 3], [-2, -1], [-100, 100], [3, 1], [5, 10], [-1, -3], [0, 0], [2, -100], ['x', 1], [0, '-0'], [0, '1e3']] as const).map(([a, b]): Step => [0, 'LRANGE', 'c:list', a, b]),
  ...([0, 4, 5, -1, -5, -6, 'x'] as const).map((i): Step => [0, 'LINDEX', 'c:list', i]),
  [0, 'LLEN', 'c:list'], [0, 'LPUSH', 'c:list', 'z'], [0, 'LRANGE', 'c:list', 0, 1], [0, 'LINDEX', 'c:list', 0], [0, 'LLEN', 'c:list'],
  [0, 'LRANGE', 'c:nolist', 0, -1], [0, 'LRANGE', 'c:nolist', 0, -1], [0, 'LINDEX', 'c:nolist', 0], [0, 'LLEN', 'c:nolist'], [0, 'LLEN', 'c:set'],
  [0, 'LRANGE', 'c:a', 0, -1], [0, 'EXISTS', 'c:list'], [0, 'EXISTS', 'c:set'], [0, 'MGET', 'c:list', 'c:set', 'c:a'],
  [0, 'ZADD', 'c:z', '1.5', 'a', '2', 'b', '-3e-7', 'c', '+inf', 'd', '0.1', 'e', '1e20', 'f'], [0, 'ZRANGE', 'c:z', 0, -1], [0, 'ZRANGE', 'c:z', 0, -1],
  [0, 'ZRANGE', 'c:z', 0, -1, 'WITHSCORES'], [0, 'ZRANGE', 'c:z', 1, 3, 'withscores'], [0, 'ZRANGE', 'c:z', -2, -1], [0, 'ZRANGE', 'c:z', 4, 1],
  [0, 'ZRANGE', 'c:z', 0, 100, 'WITHSCORES'], [0, 'ZRANGE', 'c:z', 'x', 1], [0, 'ZRANGE', 'c:z', 0, -1, 'REV'], [0, 'ZRANGE', 'c:z', 1, 2, 'BYSCORE'],
  [0, 'ZRANGE', 'c:z', 0, -1, 'WITHSCORES', 'x'], [0, 'ZSCORE', 'c:z', 'a'], [0, 'ZSCORE', 'c:z', 'c'], [0, 'ZSCORE', 'c:z', 'd'], [0, 'ZSCORE', 'c:z', 'f'],
  [0, 'ZSCORE', 'c:z', 'zz'], [0, 'ZMSCORE', 'c:z', 'zz', 'e', 'b'], [0, 'ZCARD', 'c:z'], [0, 'ZINCRBY', 'c:z', '10', 'a'], [0, 'ZSCORE', 'c:z', 'a'],
  [0, 'ZRANGE', 'c:z', 0, -1, 'WITHSCORES'], [0, 'ZRANGE', 'c:noz', 0, -1], [0, 'ZRANGE', 'c:noz', 0, -1, 'WITHSCORES'], [0, 'ZSCORE', 'c:noz', 'a'],
  [0, 'ZMSCORE', 'c:noz', 'a', 'b'], [0, 'ZCARD', 'c:noz'], [0, 'ZCARD', 'c:list'], [0, 'ZSCORE', 'c:a', 'x'], [0, 'GET', 'c:z'], [0, 'EXISTS', 'c:z'],
  [0, 'MGET', 'c:e', 'c:hh', 'c:nohash', 'c:n', 'c:e'], [0, 'MGET', 'c:e', 'c:hh', 'c:nohash', 'c:n', 'c:e'], [0, 'SET', 'c:n', '7'],
  [0, 'MGET', 'c:n', 'c:e'], [0, 'MGET', 'c:n'], [0, 'MGET', 'c:n', 'plain'], [0, 'MGET', 'c:s1', 'c:s2', 'c:s3', 'c:s4'],
  [0, 'MSET', 'c:s1', 'a', 'c:s3', 'b'], [0, 'MGET', 'c:s1', 'c:s2', 'c:s3', 'c:s4'], [0, 'MGET', 'c:s1', 'c:s2', 'c:s3', 'c:s4'],
  [0, 'DEL', 'c:hh'], [0, 'HGETALL', 'c:hh'], [0, 'GET', 'c:hh'],
  [0, 'FLUSHALL'], [0, 'GET', 'c:a'], [0, 'GET', 'c:bin'],
  [0, 'GET', 'plain'], [0, 'SET', 'plain', 'p'], [0, 'GET', 'plain'],
];

async function stats(port: number): Promise<Record<string, number>> {
  const c = new Valkey({ port, lazyConnect: false, maxRetriesPerRequest: 0 });
  try {
    const flat = (await c.call('RESPOOL', 'CACHE', 'STATS')) as Array<string | number>;
    const out: Record<string, number> = {};
    for (let i = 0; i < flat.length; i += 2) out[String(flat[i])] = Number(flat[i + 1]);
    return out;
  } finally {
    c.disconnect();
  }
}

describe('near cache', () => {
  let sides: OneServerSides;
  let standaloneProxy: RespoolProxy;

  beforeAll(async () => {
    sides = await startOneServerSides({ nearCache: NEAR_CACHE });
    standaloneProxy = await startTestProxy([{ host: sides.standalone.host, port: sides.standalone.port }], { nearCache: NEAR_CACHE });
  }, 120_000);

  afterAll(async () => {
    await standaloneProxy?.close();
    await sides?.stop();
  });

  for (const upstream of ['standalone', 'cluster'] as const) {
    for (const proto of [2, 3] as const) {
      it(`answers every cached read as one server does (${upstream}, RESP${proto})`, async () => {
        const port = upstream === 'cluster' ? sides.proxy.address.port : standaloneProxy.address.port;
        await sides.flush();
        const expected = await transcript(sides.standalone.port, proto, STEPS);
        await sides.flush();
        const before = await stats(port);
        // Twice through respool: the first run opens the tracking connections, the second is served from them.
        await transcript(port, proto, STEPS);
        await sides.flush();
        const actual = await transcript(port, proto, STEPS);
        expect(actual).toEqual(expected);
        const after = await stats(port);
        expect(after['hits']! - before['hits']!).toBeGreaterThan(100); // the reads were answered from memory, of every type
      }, 60_000);
    }
  }

  for (const confirm of ['never', 'always'] as const) {
    it(`over a fleet of two, 10,000 write-then-read trials (confirm: ${confirm}): ${confirm === 'always' ? 'no member ever answers an older value' : 'the writing member never answers an older value, the other within the invalidation'}`, async () => {
      const seed = sides.cluster.nodes[0]!;
      const settings = { nearCache: { ...NEAR_CACHE, confirm } };
      const [first, second] = await Promise.all([0, 1].map(() => startTestProxy([{ host: seed.host, port: seed.port }], settings)));
      const members = [clientFor(first!), clientFor(second!)];
      try {
        const keys = await keysOverNodes(sides.cluster, 'c:trial:', 10);
        for (const key of keys) await Promise.all(members.map((m) => m.get(key))); // both members fill every key
        const same = { served: 0, stale: 0 };
        const other = { served: 0, stale: 0, worstMs: 0 };
        await Promise.all(keys.map(async (key, k) => {
          for (let i = 0; i < 1000; i++) {
            const value = `${k}:${i}`;
            const writer = Math.floor(Math.random() * 2);
            const reader = Math.floor(Math.random() * 2);
            await members[writer]!.set(key, value);
            const start = performance.now();
            // Three reads through the same member: the first fills (or finds an entry the write should have dropped), the next are hits.
            for (let r = 0; r < 3; r++) {
              const read = await members[reader]!.get(key);
              const tally = writer === reader ? same : other;
              tally.served++;
              if (read === value) continue;
              tally.stale++;
              // Another member hears of the write from the node's invalidation: it must come.
              while ((await members[reader]!.get(key)) !== value) {
                if (performance.now() - start > 1000) throw new Error(`${key}: member ${reader} still answers an older value 1 s after the write`);
              }
              other.worstMs = Math.max(other.worstMs, performance.now() - start);
              break;
            }
          }
        }));
        const hits = (await stats(first!.address.port))['hits']! + (await stats(second!.address.port))['hits']!;
        console.log(`fleet of two, confirm ${confirm}, 10,000 trials (a write, three reads): same member ${same.stale}/${same.served} older values; other member ${other.stale}/${other.served} older values${other.stale > 0 ? `, each new within ${other.worstMs.toFixed(2)} ms` : ''}; ${hits} hits`);
        expect(same.served + other.served).toBeGreaterThanOrEqual(30_000 - other.stale * 2);
        expect(same.stale).toBe(0);
        if (confirm === 'always') expect(other.stale).toBe(0);
        expect(hits).toBeGreaterThan(15_000); // most reads after the first of each trial are answered from memory
      } finally {
        for (const m of members) m.disconnect();
        await Promise.all([first!.close(), second!.close()]);
      }
    }, 120_000);
  }

  it('a write made on the node reaches reads through respool within the invalidation (200 trials)', async () => {
    const proxy = clientFor(standaloneProxy);
    const node = new Valkey({ port: sides.standalone.port, lazyConnect: false });
    const waits: number[] = [];
    try {
      await node.set('c:direct', 'v0');
      await proxy.get('c:direct');
      for (let i = 1; i <= 200; i++) {
        expect(await proxy.get('c:direct')).toBe(`v${i - 1}`); // cached
        await node.set('c:direct', `v${i}`);
        const start = performance.now();
        while ((await proxy.get('c:direct')) !== `v${i}`) {
          if (performance.now() - start > 2000) throw new Error(`trial ${i}: still the old value after 2 s`);
        }
        waits.push(performance.now() - start);
      }
      waits.sort((a, b) => a - b);
      console.log(`direct write → new value through respool: median ${waits[100]!.toFixed(2)} ms, max ${waits[199]!.toFixed(2)} ms (200 trials)`);
    } finally {
      proxy.disconnect();
      node.disconnect();
    }
  }, 60_000);

  it('hot: true caches the keys detection ranks hot, and lets them go when they cool', async () => {
    const seed = sides.cluster.nodes[0]!;
    const proxy = await startTestProxy([{ host: seed.host, port: seed.port }], {
      nearCache: { ...NEAR_CACHE, keys: [], hot: true },
      hotKeys: { ...DEFAULT_CONFIG.hotKeys, detection: { ...DEFAULT_CONFIG.hotKeys.detection, sampleRate: 1, windowMs: 300, topK: 2 } },
    });
    const c = clientFor(proxy);
    try {
      await c.set('h:hot', 'v');
      const reads = async (key: string, n: number) => {
        const p = c.pipeline();
        for (let i = 0; i < n; i++) p.get(key);
        await p.exec();
      };
      // Hot for a window: cached from the next one, and its reads are answered from memory.
      await waitFor(async () => {
        await reads('h:hot', 200);
        const s = await stats(proxy.address.port);
        return s['hot_keys']! >= 1 && s['hits']! > 100;
      }, 'h:hot cached as hot', 10_000);
      // It stays ranked while it is read from memory (those reads are sampled too).
      const before = await stats(proxy.address.port);
      for (let i = 0; i < 10; i++) {
        await reads('h:hot', 100);
        await new Promise((r) => setTimeout(r, 100));
      }
      expect((await stats(proxy.address.port))['hits']! - before['hits']!).toBeGreaterThanOrEqual(950);
      // Other keys take the top ranks: h:hot is let go.
      await waitFor(async () => {
        await reads('h:a', 100);
        await reads('h:b', 100);
        const keys = (await c.call('RESPOOL', 'CACHE', 'KEYS')) as string[];
        return !keys.includes('h:hot');
      }, 'h:hot dropped once cold', 10_000);
      await c.set('h:hot', 'w');
      expect(await c.get('h:hot')).toBe('w');
    } finally {
      c.disconnect();
      await proxy.close();
    }
  }, 60_000);

  it('confirm: always — a write made on the node is never followed by an older value (500 trials)', async () => {
    const proxy = await startTestProxy([{ host: sides.standalone.host, port: sides.standalone.port }], { nearCache: { ...NEAR_CACHE, confirm: 'always' } });
    const c = clientFor(proxy);
    const node = new Valkey({ port: sides.standalone.port, lazyConnect: false });
    try {
      await node.set('c:confirmed', 'v0');
      await waitFor(async () => (await c.get('c:confirmed')) === 'v0' && (await stats(proxy.address.port))['entries']! > 0, 'the near cache', 5000);
      const before = await stats(proxy.address.port);
      let stale = 0;
      for (let i = 1; i <= 500; i++) {
        expect(await c.get('c:confirmed')).toBe(`v${i - 1}`); // a hit: the entry of the last fill
        await node.set('c:confirmed', `v${i}`);
        if ((await c.get('c:confirmed')) !== `v${i}`) stale++;
      }
      const after = await stats(proxy.address.port);
      expect(stale).toBe(0);
      expect(after['hits']! - before['hits']!).toBeGreaterThanOrEqual(450);
      expect(after['confirms']! - before['confirms']!).toBeGreaterThanOrEqual(450);
    } finally {
      c.disconnect();
      node.disconnect();
      await proxy.close();
    }
  }, 60_000);

  it('coalesceAll: 200 clients reading one key the cache does not hold cost the node fewer reads, and writes keep every client\'s order', async () => {
    const proxy = await startTestProxy([{ host: sides.standalone.host, port: sides.standalone.port }], { nearCache: { ...NEAR_CACHE, coalesceAll: true } });
    const node = new Valkey({ port: sides.standalone.port, lazyConnect: false });
    const clients = Array.from({ length: 200 }, () => new Valkey({ port: proxy.address.port, lazyConnect: true, maxRetriesPerRequest: 0 }));
    const gets = async () => Number(/cmdstat_get:calls=(\d+)/.exec(String(await node.info('commandstats')))?.[1] ?? 0);
    try {
      await node.set('plain:twin', 'value');
      await Promise.all(clients.map((c) => c.connect()));
      const before = await gets();
      const replies = await Promise.all(clients.map((c) => c.get('plain:twin')));
      expect(new Set(replies)).toEqual(new Set(['value']));
      const reads = (await gets()) - before;
      const joined = (await stats(proxy.address.port))['coalesced_uncached']!;
      console.log(`coalesceAll: 200 identical GETs at once → ${reads} node GETs, ${joined} answered from a twin`);
      expect(reads + joined).toBe(200);
      expect(joined).toBeGreaterThan(0);
      // One client's pipelined GET, SET, GET beside 20 others reading the same key: in order.
      const c = clients[0]!;
      let wrong = 0;
      let reading = true;
      const background = Promise.all(clients.slice(1, 21).map(async (r) => {
        while (reading) await r.get('plain:twin');
      }));
      let last = 'value';
      for (let round = 0; round < 300; round++) {
        const [[, a], [, ok], [, b]] = (await c.pipeline().get('plain:twin').set('plain:twin', `v${round}`).get('plain:twin').exec())!;
        if (a !== last || ok !== 'OK' || b !== `v${round}`) wrong++;
        last = `v${round}`;
      }
      reading = false;
      await background;
      expect({ wrong }).toEqual({ wrong: 0 });
    } finally {
      for (const c of clients) c.disconnect();
      node.disconnect();
      await proxy.close();
    }
  }, 60_000);

  for (const confirm of ['never', 'always'] as const) {
    it(`one connection's pipelines of GET, GET, SET, GET answer in order, as one server does (2,000 of each, confirm ${confirm})`, async () => {
      const seed = sides.cluster.nodes[0]!;
      const proxy = await startTestProxy([{ host: seed.host, port: seed.port }], { nearCache: { ...NEAR_CACHE, confirm } });
      const c = clientFor(proxy);
      const busy = clientFor(proxy); // another client reading the same keys meanwhile: fills and hits in flight
      try {
        let reading = true;
        const keys = await keysOverNodes(sides.cluster, 'c:order:', 10);
        const last = new Map<string, string | null>(keys.map((k) => [k, null]));
        for (const k of keys) await c.del(k);
        const background = (async () => {
          while (reading) await Promise.all(keys.map((k) => busy.get(k)));
        })();
        let wrong = 0;
        for (let round = 0; round < 200; round++) {
          const p = c.pipeline();
          for (const key of keys) p.get(key).get(key).set(key, `${round}:${key}`).get(key);
          const replies = (await p.exec())!.map(([err, v]) => (err === null ? v : `error ${String(err)}`));
          keys.forEach((key, i) => {
            const [before1, before2, set, after] = replies.slice(i * 4, i * 4 + 4);
            const value = `${round}:${key}`;
            if (before1 !== last.get(key) || before2 !== last.get(key) || set !== 'OK' || after !== value) wrong++;
            last.set(key, value);
          });
        }
        reading = false;
        await background;
        const s = await stats(proxy.address.port);
        expect({ wrong }).toEqual({ wrong: 0 });
        expect(s['hits']! + s['coalesced']!).toBeGreaterThan(1000); // most reads before a round's SET were the cache's
      } finally {
        c.disconnect();
        busy.disconnect();
        await proxy.close();
      }
    }, 60_000);
  }

  it('200 clients reading one cold key at once through a fresh respool cost the node one GET', async () => {
    const proxy = await startTestProxy([{ host: sides.standalone.host, port: sides.standalone.port }], { nearCache: NEAR_CACHE });
    const node = new Valkey({ port: sides.standalone.port, lazyConnect: false });
    const clients = Array.from({ length: 200 }, () => new Valkey({ port: proxy.address.port, lazyConnect: true, maxRetriesPerRequest: 0 }));
    const gets = async () => Number(/cmdstat_get:calls=(\d+)/.exec(String(await node.info('commandstats')))?.[1] ?? 0);
    try {
      await node.set('c:cold', 'value');
      await Promise.all(clients.map((c) => c.connect()));
      const before = await gets();
      const replies = await Promise.all(clients.map((c) => c.get('c:cold'))); // the tracking connection is not open yet: every read waits for its one fill
      expect(new Set(replies)).toEqual(new Set(['value']));
      expect((await gets()) - before).toBe(1);
      expect(await stats(proxy.address.port)).toMatchObject({ fills: 1, coalesced: 199 });
    } finally {
      for (const c of clients) c.disconnect();
      node.disconnect();
      await proxy.close();
    }
  }, 60_000);

  it('keeps its byte bound under a flood of distinct keys', async () => {
    const maxBytes = 64 * 1024;
    const proxy = await startTestProxy([{ host: sides.standalone.host, port: sides.standalone.port }], { nearCache: { ...NEAR_CACHE, maxBytes } });
    const c = clientFor(proxy);
    try {
      const value = 'x'.repeat(200);
      await c.get('c:warm'); // opens the tracking connection
      await waitFor(async () => (await stats(proxy.address.port))['tracking_connections'] === 1, 'the near cache', 5000);
      for (let i = 0; i < 2000; i += 100) {
        const p = c.pipeline();
        for (let j = i; j < i + 100; j++) p.set(`c:flood:${j}`, value);
        for (let j = i; j < i + 100; j++) p.get(`c:flood:${j}`);
        await p.exec();
      }
      const s = await stats(proxy.address.port);
      expect(s['bytes']).toBeLessThanOrEqual(maxBytes);
      expect(s['evictions']).toBeGreaterThan(500);
      expect(s['entries']).toBeGreaterThan(100);
    } finally {
      c.disconnect();
      await proxy.close();
    }
  }, 60_000);

  it('drops what a tracking connection filled when the node closes it', async () => {
    const c = clientFor(standaloneProxy);
    const node = new Valkey({ port: sides.standalone.port, lazyConnect: false });
    try {
      await node.set('c:lost', 'before');
      await c.get('c:lost');
      await waitFor(async () => (await c.get('c:lost')) === 'before' && (await stats(standaloneProxy.address.port))['entries']! > 0, 'the near cache', 5000);
      const list = String(await node.call('CLIENT', 'LIST'));
      const tracking = list.split('\n').filter((l) => / flags=\S*t/.test(l)).map((l) => /id=(\d+)/.exec(l)![1]!);
      expect(tracking.length).toBeGreaterThan(0);
      for (const id of tracking) await node.call('CLIENT', 'KILL', 'ID', id);
      await waitFor(async () => (await stats(standaloneProxy.address.port))['entries'] === 0, 'the near cache', 5000);
      await node.set('c:lost', 'after'); // no tracking connection to tell respool: nothing cached may answer
      expect(await c.get('c:lost')).toBe('after');
    } finally {
      c.disconnect();
      node.disconnect();
    }
  }, 30_000);
});
