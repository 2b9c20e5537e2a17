/**
 * Namespaces (users[].keyPrefix, issue 30) through respool in front of a standalone server and a
 * 3+3 cluster, compared with one valkey-server given the same exchange (the oracle): two users
 * with the same key names each see their own keyspace, byte for byte as if each had a server of
 * its own; the nodes hold the names behind each prefix; a script cannot reach the other namespace.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Valkey } from 'iovalkey';
import { startCluster, startStandalone, type ValkeyCluster, type ValkeyNode } from '../harness/valkey-processes.js';
import type { RespoolConfig } from '../../src/config/types.js';
import type { RespoolProxy } from '../../src/server.js';
import { clientFor, startTestProxy } from '../helpers/proxy.js';
import { RawConnection } from '../helpers/raw-resp.js';

type Exchange = (c: Valkey) => Promise<unknown>;

/**
 * The families again over a raw RESP3 connection (HELLO 3), replies compared byte for byte: maps,
 * sets, doubles, and the names in them (XREAD's and XREADGROUP's map of streams, popped keys, a
 * script's declared key). Hash tags where a command names two keys, as a cluster needs.
 */
const RESP3_FAMILIES: string[][] = [
  ['SET', '{k}', 'v1'], ['GET', '{k}'], ['MSET', '{m}1', '1', '{m}2', '2'], ['MGET', '{m}1', '{m}2', 'nope'],
  ['RPUSH', '{q}list', 'x', 'y', 'z'], ['LRANGE', '{q}list', '0', '-1'], ['LMOVE', '{q}list', '{q}list2', 'LEFT', 'RIGHT'],
  ['LMPOP', '1', '{q}list', 'LEFT'], ['BLPOP', '{q}list2', '1'],
  ['HSET', 'h', 'f', '1', 'g', '2'], ['HGETALL', 'h'], ['SADD', 's1', 'a', 'b'], ['SMEMBERS', 's1'], ['SISMEMBER', 's1', 'a'],
  ['ZADD', 'z', '1.5', 'one', '2', 'two'], ['ZSCORE', 'z', 'one'], ['ZRANGE', 'z', '0', '-1', 'WITHSCORES'], ['ZMPOP', '1', 'z', 'MIN'],
  ['PFADD', 'hll', 'a', 'b'], ['PFCOUNT', 'hll'], ['SETBIT', 'bits', '7', '1'], ['BITCOUNT', 'bits'],
  ['GEOADD', 'geo', '13.361389', '38.115556', 'Palermo'], ['GEOPOS', 'geo', 'Palermo'],
  ['XADD', 'stream', '1-1', 'f', 'v'], ['XREAD', 'STREAMS', 'stream', '0'], ['XGROUP', 'CREATE', 'stream', 'grp', '0'],
  ['XREADGROUP', 'GROUP', 'grp', 'c1', 'STREAMS', 'stream', '>'], ['XPENDING', 'stream', 'grp'],
  ['EVAL', "return redis.call('GET', KEYS[1])", '1', '{k}'], ['EVAL', 'return KEYS[1]', '1', '{k}'],
  ['MULTI'], ['INCR', 'counter'], ['GET', 'counter'], ['EXEC'],
  ['EXISTS', '{k}', 'h', 'nope'], ['TYPE', 'z'], ['DBSIZE'],
];

async function resp3Exchange(port: number, auth: string[] | null): Promise<string[]> {
  const c = await RawConnection.connect(port);
  try {
    if (auth !== null) expect(await c.call('AUTH', ...auth)).toBe('+OK\r\n');
    await c.call('HELLO', '3'); // its reply names the server: not compared
    const out: string[] = [];
    for (const command of RESP3_FAMILIES) out.push(`${command[0]} → ${await c.call(...command)}`);
    return out;
  } finally {
    c.close();
  }
}

/**
 * Function libraries over a raw connection (RESP2, or RESP3 after HELLO 3): loaded, called, listed
 * with and without code and patterns, replaced, deleted — replies compared byte for byte. One
 * function per library and one library per listing: a server lists them in its hash order (seeded
 * per process), which no two servers share.
 */
const LIBRARY = "#!lua name=lib\nredis.register_function('get1', function(keys, args) return redis.call('GET', keys[1]) end)";
const LIBRARY_T = [
  '#!lua name=libt',
  "redis.register_function{function_name='set1', callback=function(keys, args) return redis.call('SET', keys[1], args[1]) end, description='sets'}",
].join('\n');
const LIBRARY_2 = [
  '#!lua name=lib',
  "redis.register_function{function_name = \"get1\", callback = function(keys, args) return 'v2:' .. (redis.call('GET', keys[1]) or '') end, flags = {'no-writes'}}",
].join('\n');
const FUNCTION_EXCHANGE: string[][] = [
  ['FUNCTION', 'LOAD', LIBRARY], ['FUNCTION', 'LOAD', LIBRARY], ['FUNCTION', 'LOAD', LIBRARY_T], ['FCALL', 'set1', '1', '{k}', 'v'],
  ['FCALL', 'get1', '1', '{k}'], ['FCALL', 'nosuch', '0'], ['FUNCTION', 'STATS'], ['FUNCTION', 'LIST', 'LIBRARYNAME', 'lib'],
  ['FUNCTION', 'LIST', 'LIBRARYNAME', 'lib', 'WITHCODE'], ['FUNCTION', 'LIST', 'WITHCODE', 'LIBRARYNAME', 'lib?'],
  ['FUNCTION', 'LIST', 'LIBRARYNAME', 'zz*'], ['FUNCTION', 'DELETE', 'nosuch'], ['FUNCTION', 'DELETE', 'libt'], ['FUNCTION', 'LIST'],
  ['FUNCTION', 'LOAD', 'REPLACE', LIBRARY_2], ['FCALL_RO', 'get1', '1', '{k}'], ['FCALL', 'set1', '1', '{k}', 'v'],
  ['FUNCTION', 'LIST', 'WITHCODE'], ['FUNCTION', 'DELETE', 'lib'], ['FUNCTION', 'LIST'], ['FUNCTION', 'LOAD', LIBRARY],
  ['FUNCTION', 'FLUSH', 'NOW'], ['FUNCTION', 'FLUSH', 'a', 'b'],
];

async function functionExchange(port: number, auth: string[] | null, protocol: 2 | 3, commands: string[][]): Promise<string[]> {
  const c = await RawConnection.connect(port);
  try {
    if (auth !== null) expect(await c.call('AUTH', ...auth)).toBe('+OK\r\n');
    if (protocol === 3) await c.call('HELLO', '3');
    const out: string[] = [];
    for (const command of commands) out.push(`${command.slice(0, 3).join(' ').slice(0, 40)} → ${await c.call(...command)}`);
    return out;
  } finally {
    c.close();
  }
}

const users = [
  { name: 'default', password: 'adminpw' },
  { name: 'a', password: 'pa', keyPrefix: 'a:' },
  { name: 'b', password: 'pb', keyPrefix: 'b:' },
] as unknown as RespoolConfig['users'];

/** One exchange over several families; the same names in both namespaces (hash tags where a command writes two keys, as a cluster needs). */
const families: Exchange = async (c) => {
  const out: unknown[] = [];
  out.push(await c.set('{k}', 'v1'), await c.get('{k}'), await c.mset('m1', '1', 'm2', '2'), await c.mget('m1', 'm2', 'nope'));
  out.push(await c.rpush('{q}list', 'x', 'y', 'z'), await c.lrange('{q}list', 0, -1), await c.lmove('{q}list', '{q}list2', 'LEFT', 'RIGHT'));
  out.push(await c.hset('h', 'f', '1'), await c.hgetall('h'), await c.sadd('s1', 'a', 'b'), await c.sadd('s2', 'b', 'c'));
  out.push(await c.zadd('z', 1, 'one', 2, 'two'), await c.zrange('z', 0, -1, 'WITHSCORES'));
  out.push(await c.pfadd('hll', 'a', 'b'), await c.pfcount('hll'));
  out.push(await c.call('PFMERGE', 'empty-hll'), await c.exists('empty-hll')); // no source: destkey is created, in the namespace
  out.push(await c.setbit('bits', 7, 1), await c.bitcount('bits'));
  out.push(await c.xadd('stream', '1-1', 'f', 'v'), await c.xlen('stream'));
  out.push(await c.blpop('{q}list2', 1), await c.exists('{k}', '{q}list', 'h', 'nope'), await c.type('z'));
  out.push(await c.eval("redis.call('SET', KEYS[1], ARGV[1]); return redis.call('GET', KEYS[1])", 1, 'scripted', 'sv'));
  // A script that returns its declared keys: the names the client passed, as one server returns them.
  out.push(await c.eval('return {KEYS[1], KEYS[2], ARGV[1], {KEYS[1]}}', 2, 'a{t}', 'b{t}', 'c{t}'));
  const tx = await c.multi().incr('counter').incr('counter').get('counter').exec();
  out.push(tx);
  // Names in EXEC's array: a popped key, KEYS — the client's, as outside MULTI.
  out.push(await c.multi().rpush('{t}mq', 'a').call('LMPOP', '1', '{t}mq', 'LEFT').keys('{t}m*').rpush('{t}mq', 'b').call('BLPOP', '{t}mq', '1').exec());
  // The same after WATCH: the block runs on the client's own connection to the node (a WATCH lane).
  await c.watch('{t}mq');
  out.push(await c.multi().rpush('{t}mq', 'c').call('LMPOP', '1', '{t}mq', 'LEFT').call('BLPOP', '{t}mq', '1').exec());
  out.push((await c.keys('*')).sort(), await c.dbsize());
  const scanned: string[] = [];
  let cursor = '0';
  do {
    const [next, batch] = await c.scan(cursor, 'MATCH', 'm*', 'COUNT', 100);
    cursor = next;
    scanned.push(...batch);
  } while (cursor !== '0');
  out.push(scanned.sort());
  // The SCAN family over one key (small, listpack-encoded: one step, in insertion order on any server).
  out.push(await c.hscan('h', '0', 'COUNT', 100), await c.sscan('s1', '0', 'MATCH', '*'), await c.zscan('z', '0'));
  out.push(await c.sort('{q}list', 'ALPHA'), await c.rename('{k}', '{k}2'), await c.get('{k}2'));
  return out;
};

describe('namespaces (users[].keyPrefix)', () => {
  let standalone: ValkeyNode;
  let cluster: ValkeyCluster;
  let oracle: ValkeyNode;
  const proxies: RespoolProxy[] = [];
  const clients: Valkey[] = [];

  beforeAll(async () => {
    [standalone, cluster, oracle] = await Promise.all([startStandalone(), startCluster({ primaries: 3, replicasPerPrimary: 1 }), startStandalone()]);
  }, 120_000);

  afterAll(async () => {
    for (const c of clients) c.disconnect();
    await Promise.all(proxies.map((p) => p.close()));
    await Promise.all([standalone?.stop(), cluster?.stop(), oracle?.stop()]);
  });

  const as = (proxy: RespoolProxy, username: string, password: string) => {
    const c = clientFor(proxy, { username, password });
    clients.push(c);
    return c;
  };
  const direct = () => {
    const c = new Valkey({ host: oracle.host, port: oracle.port, maxRetriesPerRequest: 0 });
    clients.push(c);
    return c;
  };

  const upstreams: Array<{ name: string; seed: () => Array<{ host: string; port: number }>; nodes: () => Promise<ValkeyNode[]> }> = [
    { name: 'standalone', seed: () => [{ host: standalone.host, port: standalone.port }], nodes: async () => [standalone] },
    { name: '3+3 cluster', seed: () => [{ host: cluster.nodes[0]!.host, port: cluster.nodes[0]!.port }], nodes: () => cluster.primaries() },
  ];

  it("a key the namespace makes longer than the nodes take gets Valkey's protocol error and the connection closed, as a server does; others go on", async () => {
    const LIMIT = 1024 * 1024; // Valkey's smallest proto-max-bulk-len
    const limited = await startTestProxy([{ host: standalone.host, port: standalone.port }], { users, limits: { maxBulkLength: LIMIT } } as Partial<RespoolConfig>);
    proxies.push(limited);
    await oracle.call('CONFIG', 'SET', 'proto-max-bulk-len', String(LIMIT));
    try {
      const server = await RawConnection.connect(oracle.port);
      // What a's key is once behind "a:": the server answers at the bulk's header and closes. Only the
      // header is sent: a body still arriving at the close would make it a reset, which can drop the reply.
      server.write(`*3\r\n$3\r\nSET\r\n$${LIMIT + 1}\r\n`);
      const want = await server.read();
      await server.waitClosed();
      const a = await RawConnection.connect(limited.address.port);
      const b = await RawConnection.connect(limited.address.port);
      expect(await a.call('AUTH', 'a', 'pa')).toBe('+OK\r\n');
      expect(await b.call('AUTH', 'b', 'pb')).toBe('+OK\r\n');
      expect(await a.call('SET', 'k'.repeat(LIMIT - 2), 'v')).toBe('+OK\r\n'); // stored: exactly the limit
      expect(await a.call('SET', 'k'.repeat(LIMIT - 1), 'v')).toBe(want);
      await a.waitClosed();
      expect(want).toBe('-ERR Protocol error: invalid bulk length\r\n');
      expect(await b.call('PING')).toBe('+PONG\r\n'); // the shared links never carried it
      expect(await b.call('SINTERCARD', '1', 'k'.repeat(LIMIT - 1))).toBe(want); // the general path too (a numkeys command)
      await b.waitClosed();
      b.close();
    } finally {
      await oracle.call('CONFIG', 'SET', 'proto-max-bulk-len', String(512 * 1024 * 1024));
    }
  }, 30_000);

  for (const upstream of upstreams) {
    describe(upstream.name, () => {
      let proxy: RespoolProxy;
      beforeAll(async () => {
        proxy = await startTestProxy(upstream.seed(), { users, cluster: { refreshPeriodMs: 1000 } } as Partial<RespoolConfig>);
        proxies.push(proxy);
      }, 60_000);

      it('two namespaces with the same key names each answer as one server of their own', async () => {
        await Promise.all((await upstream.nodes()).map((n) => n.call('FLUSHALL')));
        await oracle.call('FLUSHALL');
        const want = await families(direct());
        const gotA = await families(as(proxy, 'a', 'pa'));
        const gotB = await families(as(proxy, 'b', 'pb'));
        expect(gotA).toEqual(want);
        expect(gotB).toEqual(want);
        // The nodes hold each namespace's names behind its prefix, nothing outside them.
        const stored: string[] = [];
        for (const n of await upstream.nodes()) {
          stored.push(...((await n.call('KEYS', '*')) as unknown[]).map(String));
        }
        expect(stored.length).toBeGreaterThan(0);
        expect(stored.every((k) => k.startsWith('a:') || k.startsWith('b:'))).toBe(true);
        expect(stored.filter((k) => k.startsWith('a:')).length).toBe(stored.filter((k) => k.startsWith('b:')).length);
      });

      it('RESP3: two namespaces with the same key names each answer byte for byte as one server of their own', async () => {
        await Promise.all((await upstream.nodes()).map((n) => n.call('FLUSHALL')));
        await oracle.call('FLUSHALL');
        const want = await resp3Exchange(oracle.port, null);
        expect(await resp3Exchange(proxy.address.port, ['a', 'pa'])).toEqual(want);
        expect(await resp3Exchange(proxy.address.port, ['b', 'pb'])).toEqual(want);
      });

      it('FLUSHALL, DBSIZE and RANDOMKEY keep to the namespace; a script cannot reach another', async () => {
        const a = as(proxy, 'a', 'pa');
        const b = as(proxy, 'b', 'pb');
        await a.set('only-a', '1');
        await b.set('only-b', '1');
        await b.set('second-b', '1');
        expect(await a.randomkey()).not.toBe('only-b');
        const before = await b.dbsize();
        expect(await a.flushall()).toBe('OK');
        expect(await a.dbsize()).toBe(0);
        expect(await a.randomkey()).toBeNull();
        expect(await b.dbsize()).toBe(before);
        expect(await b.get('only-b')).toBe('1');
        // A script given a's name for b's key (b:only-b) stays in a's namespace on the node.
        await expect(a.eval("return redis.call('GET', 'b:only-b')", 0)).rejects.toThrow(/ACL|NOPERM|permission/i);
        // Inside MULTI they run at EXEC in their place, over the namespace's keys only (handlers/transaction-apart.ts).
        await a.set('again-a', '1');
        const ran = await a.multi().set('{t}x', '1').dbsize().flushall().dbsize().set('{t}y', '2').dbsize().exec();
        expect(ran).toEqual([[null, 'OK'], [null, 2], [null, 'OK'], [null, 0], [null, 'OK'], [null, 1]]);
        expect(await a.get('again-a')).toBeNull();
        expect(await a.get('{t}y')).toBe('2');
        expect(await b.get('only-b')).toBe('1');
        expect(await b.dbsize()).toBe(before);
      });

      it('CLIENT PAUSE WRITE lets a namespaced no-writes function run at once and holds one that writes, as Valkey', async () => {
        const PAUSE_MS = 2500;
        const a = await RawConnection.connect(proxy.address.port);
        expect(await a.call('AUTH', 'a', 'pa')).toBe('+OK\r\n');
        await a.call('FUNCTION', 'FLUSH');
        const library = "#!lua name=pauselib\nredis.register_function{function_name='ro', callback=function(k) return redis.call('get', k[1]) end, flags={'no-writes'}}\nredis.register_function('rw', function(k) return redis.call('incr', k[1]) end)";
        expect(await a.call('FUNCTION', 'LOAD', library)).toBe('$8\r\npauselib\r\n');
        const admin = await RawConnection.connect(proxy.address.port);
        expect(await admin.call('AUTH', 'default', 'adminpw')).toBe('+OK\r\n');
        const held: Record<string, boolean> = {};
        for (const [name, command] of [['ro', ['FCALL', 'ro', '1', 'k']], ['rw', ['FCALL', 'rw', '1', 'n']]] as const) {
          expect(await admin.call('CLIENT', 'PAUSE', String(PAUSE_MS), 'WRITE')).toBe('+OK\r\n');
          const started = Date.now();
          await a.call(...command);
          held[name] = Date.now() - started > PAUSE_MS / 2;
          expect(await admin.call('CLIENT', 'UNPAUSE')).toBe('+OK\r\n');
        }
        expect(held).toEqual({ ro: false, rw: true });
        await a.call('FUNCTION', 'FLUSH');
        a.close();
        admin.close();
      }, 30_000);

      it("FUNCTION DUMP and RESTORE carry the namespace's libraries only, with each policy, as one server of its own", async () => {
        await Promise.all((await upstream.nodes()).map((n) => n.call('FUNCTION', 'FLUSH')));
        await oracle.call('FUNCTION', 'FLUSH');
        const run = async (c: Valkey) => {
          const out: unknown[] = [];
          const step = async (f: () => Promise<unknown>) => {
            try {
              out.push(await f());
            } catch (e) {
              out.push(`error: ${(e as Error).message}`);
            }
          };
          await step(() => c.set('{k}', 'v1'));
          await step(() => c.call('FUNCTION', 'LOAD', LIBRARY));
          const payload = (await c.callBuffer('FUNCTION', 'DUMP')) as Buffer;
          await step(() => c.call('FUNCTION', 'DELETE', 'lib'));
          await step(() => c.call('FUNCTION', 'RESTORE', payload));
          await step(() => c.call('FUNCTION', 'LIST'));
          await step(() => c.call('FUNCTION', 'RESTORE', payload)); // APPEND: lib exists
          await step(() => c.call('FUNCTION', 'RESTORE', payload, 'REPLACE'));
          await step(() => c.call('FUNCTION', 'LOAD', LIBRARY_T));
          await step(() => c.call('FUNCTION', 'RESTORE', payload, 'FLUSH'));
          await step(() => c.call('FUNCTION', 'LIST')); // libt gone
          await step(() => c.call('FUNCTION', 'RESTORE', 'bad_payload'));
          await step(() => c.call('FUNCTION', 'RESTORE', payload, 'BOGUS'));
          await step(() => c.call('FUNCTION', 'RESTORE', 'a', 'b', 'c'));
          await step(() => c.call('FCALL', 'get1', '1', '{k}'));
          return { out, payload };
        };
        const want = await run(direct());
        const a = await run(as(proxy, 'a', 'pa'));
        const b = await run(as(proxy, 'b', 'pb'));
        expect(a.out).toEqual(want.out);
        expect(b.out).toEqual(want.out);
        // A dump made through respool restores into a server of its own; a server's own dump
        // (its code LZF-compressed: 0xC3 after the opcode) restores into a namespace.
        expect(want.payload[1]).toBe(0xc3);
        await oracle.call('FUNCTION', 'FLUSH');
        expect(await direct().call('FUNCTION', 'RESTORE', a.payload)).toBe('OK');
        const c = as(proxy, 'a', 'pa');
        expect(await c.call('FUNCTION', 'RESTORE', want.payload, 'REPLACE')).toBe('OK');
        expect(await c.call('FUNCTION', 'LIST', 'WITHCODE')).toEqual(await direct().call('FUNCTION', 'LIST', 'WITHCODE'));
        expect(await as(proxy, 'b', 'pb').call('FUNCTION', 'LIST', 'WITHCODE')).toEqual(await direct().call('FUNCTION', 'LIST', 'WITHCODE'));
      });

      for (const protocol of [2, 3] as const) {
        it(`RESP${protocol}: each namespace has function libraries of its own, byte for byte as one server of its own`, async () => {
          const nodes = await upstream.nodes();
          await Promise.all(nodes.map((n) => n.call('FUNCTION', 'FLUSH')));
          await oracle.call('FUNCTION', 'FLUSH');
          const want = await functionExchange(oracle.port, null, protocol, FUNCTION_EXCHANGE);
          // a's library stays loaded while b runs the same exchange: b neither sees it nor collides with it.
          expect(await functionExchange(proxy.address.port, ['a', 'pa'], protocol, FUNCTION_EXCHANGE)).toEqual(want);
          expect(await functionExchange(proxy.address.port, ['b', 'pb'], protocol, FUNCTION_EXCHANGE)).toEqual(want);
          const listing = [['FUNCTION', 'LIST', 'WITHCODE']];
          const wantListing = await functionExchange(oracle.port, null, protocol, listing);
          for (const n of nodes) {
            const names = ((await n.call('FUNCTION', 'LIST')) as unknown[][]).map((lib) => String(lib[1]));
            expect(names.sort()).toEqual(['ns613a__lib', 'ns623a__lib']); // a: and b: in hex
          }
          // b's FUNCTION FLUSH leaves a's library; DUMP and RESTORE would carry every namespace's.
          expect(await functionExchange(proxy.address.port, ['b', 'pb'], protocol, [['FUNCTION', 'FLUSH'], ['FUNCTION', 'LIST']])).toEqual([
            'FUNCTION FLUSH → +OK\r\n',
            'FUNCTION LIST → *0\r\n',
          ]);
          expect(await functionExchange(proxy.address.port, ['a', 'pa'], protocol, listing)).toEqual(wantListing);
        });
      }
    });
  }
});
