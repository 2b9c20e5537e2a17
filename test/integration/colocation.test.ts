/**
 * Colocation rules through respool in front of a 3+3 cluster, compared with one valkey-server
 * given the same exchange under the client's names (the oracle): what the client reads back —
 * popped keys, stream names, KEYS and SCAN — is byte for byte the server's, and WATCH, MULTI and
 * a script over keys of several slots run on one node.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Valkey } from 'iovalkey';
import calculateSlot from 'cluster-key-slot';
import { startCluster, startStandalone, type ValkeyCluster, type ValkeyNode } from '../harness/valkey-processes.js';
import type { RespoolProxy } from '../../src/server.js';
import { clientFor, startTestProxy } from '../helpers/proxy.js';
import { RawConnection } from '../helpers/raw-resp.js';

type Exchange = (c: Valkey) => Promise<unknown>;

describe('colocation rules', () => {
  let cluster: ValkeyCluster;
  let oracle: ValkeyNode;
  let some: RespoolProxy; // app:* colocated, other keys as they are
  let every: RespoolProxy; // every key colocated
  const clients: Valkey[] = [];

  beforeAll(async () => {
    [cluster, oracle] = await Promise.all([startCluster({ primaries: 3, replicasPerPrimary: 1 }), startStandalone()]);
    const seed = [{ host: cluster.nodes[0]!.host, port: cluster.nodes[0]!.port }];
    some = await startTestProxy(seed, { colocate: [{ keys: 'app:*', tag: 'app' }] });
    every = await startTestProxy(seed, { colocate: [{ keys: '*', tag: 'all' }] });
  }, 60_000);

  afterAll(async () => {
    for (const c of clients) c.disconnect();
    await some?.close();
    await every?.close();
    await Promise.all([cluster?.stop(), oracle?.stop()]);
  });

  const through = async (proxy: RespoolProxy) => {
    const c = clientFor(proxy);
    clients.push(c);
    return c;
  };
  const direct = async () => {
    const c = new Valkey({ host: oracle.host, port: oracle.port, maxRetriesPerRequest: 0 });
    clients.push(c);
    return c;
  };

  /** The exchange through respool and against the oracle, each from an empty keyspace. */
  async function same(proxy: RespoolProxy, exchange: Exchange): Promise<unknown> {
    await Promise.all((await cluster.primaries()).map((n) => n.call('FLUSHALL')));
    await oracle.call('FLUSHALL');
    const got = await exchange(await through(proxy));
    const want = await exchange(await direct());
    expect(got).toEqual(want);
    return got;
  }

  const keys = ['app:a', 'app:b', 'app:queue', 'plain:1', 'plain:2'];

  it('the rule\'s keys of several slots share one slot on the nodes', async () => {
    expect(new Set(keys.slice(0, 3).map((k) => calculateSlot(k))).size).toBeGreaterThan(1);
    const c = await through(some);
    await c.mset('app:a', '1', 'app:b', '2');
    const owner = await cluster.primaryForSlot(calculateSlot('app'));
    expect(await owner.call('MGET', '{app}app:a', '{app}app:b')).toEqual(['1', '2']);
  });

  it('WATCH, MULTI and EXEC over the rule\'s keys, and a script over them', async () => {
    await same(some, async (c) => {
      await c.set('app:a', '10');
      await c.watch('app:a', 'app:b');
      const exec = await c.multi().incr('app:a').set('app:b', 'x').exec();
      const script = await c.eval("redis.call('set', KEYS[2], redis.call('get', KEYS[1])) return redis.call('get', KEYS[2])", 2, 'app:a', 'app:queue');
      const names = await c.eval('return {KEYS[1], KEYS[2], ARGV[1]}', 2, 'app:a', 'app:b', 'app:a'); // the client's names back
      return [exec, script, names, await c.mget('app:a', 'app:b', 'app:queue')];
    });
  });

  // RESP3's map form of XREAD: test/unit/colocation.test.ts (iovalkey speaks RESP2 only).
  it('popped keys and stream names come back as the client\'s', async () => {
    for (const proxy of [some, every]) {
      await same(proxy, async (c) => {
        await c.rpush('app:queue', 'j1', 'j2');
        await c.zadd('app:z', 1, 'm');
        await c.xadd('app:s', '1-1', 'f', 'v');
        return [
          await c.call('BLPOP', 'app:queue', 'app:none', '1'),
          await c.call('LMPOP', '2', 'app:none', 'app:queue', 'LEFT'),
          await c.call('BZPOPMIN', 'app:z', '1'),
          await c.call('XREAD', 'STREAMS', 'app:s', '0'),
        ];
      });
    }
  });

  it('KEYS and SCAN list the client\'s names, filtered by its pattern', async () => {
    for (const proxy of [some, every]) {
      await same(proxy, async (c) => {
        for (const k of keys) await c.set(k, 'v');
        const scanned: string[] = [];
        let cursor = '0';
        do {
          const [next, batch] = (await c.scan(cursor, 'MATCH', 'app:*', 'COUNT', 100)) as [string, string[]];
          scanned.push(...batch);
          cursor = next;
        } while (cursor !== '0');
        return [((await c.keys('*')) as string[]).sort(), ((await c.keys('app:[ab]')) as string[]).sort(), scanned.sort(), await c.dbsize() > 0];
      });
    }
  });

  it('RESPOOL COLOCATE CHECK lists keys stored before their rule, and MOVE puts them under the rule\'s name', async () => {
    await Promise.all((await cluster.primaries()).map((n) => n.call('FLUSHALL')));
    const raw = async (...args: string[]) => (await cluster.primaryForSlot(calculateSlot(args[1]!))).call(...args);
    await raw('SET', 'app:old', 'before the rule', 'PX', '600000'); // written before the rule existed
    await raw('SET', 'app:both', 'old value');
    await raw('SET', 'plain:1', 'no rule takes it');
    const c = await through(some);
    await c.set('app:both', 'new value'); // stored {app}app:both: the old app:both cannot be moved over it
    await c.set('app:a', 'colocated');
    expect(await c.get('app:old')).toBeNull(); // read as {app}app:old

    const entries = (rows: unknown) => (rows as string[][]).map((r) => Object.fromEntries(r.flatMap((v, i) => (i % 2 === 0 ? [[v, r[i + 1]]] : []))) as Record<string, string>);
    const checked = entries(await c.call('RESPOOL', 'COLOCATE', 'CHECK')).sort((a, b) => a.key!.localeCompare(b.key!));
    const nodeOf = async (k: string) => (await cluster.primaryForSlot(calculateSlot(k))).address;
    expect(checked).toEqual([
      { key: 'app:both', client_key: 'app:both', stored_as: '{app}app:both', node: await nodeOf('app:both') },
      { key: 'app:old', client_key: 'app:old', stored_as: '{app}app:old', node: await nodeOf('app:old') },
    ]);
    expect(entries(await c.call('RESPOOL', 'COLOCATE', 'CHECK', 'COUNT', '1'))).toHaveLength(1);
    // Another respool over the same nodes, every key colocated under {all}: each of these keys is one, {app}app:a too.
    const everyClient = await through(every);
    expect(entries(await everyClient.call('RESPOOL', 'COLOCATE', 'CHECK')).map((e) => e.key).sort()).toEqual(['app:both', 'app:old', 'plain:1', '{app}app:a', '{app}app:both']);

    const moved = entries(await c.call('RESPOOL', 'COLOCATE', 'MOVE')).sort((a, b) => a.key!.localeCompare(b.key!));
    expect(moved).toEqual([
      { key: 'app:both', stored_as: '{app}app:both', result: 'target exists' },
      { key: 'app:old', stored_as: '{app}app:old', result: 'moved' },
    ]);
    expect(await c.get('app:old')).toBe('before the rule');
    const ttl = await c.pttl('app:old');
    expect(ttl).toBeGreaterThan(500_000);
    expect(ttl).toBeLessThanOrEqual(600_000);
    expect(await raw('EXISTS', 'app:old')).toBe(0);
    expect(await c.get('app:both')).toBe('new value');
    expect(entries(await c.call('RESPOOL', 'COLOCATE', 'CHECK')).map((e) => e.key)).toEqual(['app:both']);
    await expect(c.call('RESPOOL', 'COLOCATE', 'CHECK', 'COUNT', '0')).rejects.toThrow(/not an integer/);
    await expect(c.call('RESPOOL', 'COLOCATE', 'FIX')).rejects.toThrow(/unknown subcommand/i);
  });

  it('a client name that is another key\'s stored form is refused', async () => {
    const c = await through(some);
    await expect(c.get('{app}app:a')).rejects.toThrow(/stored form of another key/);
  });

  it('shard channels stay channels, and keyspace notifications name the client\'s keys', async () => {
    const primaries = await cluster.primaries();
    await Promise.all([oracle, ...primaries].map((n) => n.call('CONFIG', 'SET', 'notify-keyspace-events', 'KEA')));
    const exchange = async (port: number): Promise<string[]> => {
      const sub = await RawConnection.connect(port);
      const pub = await RawConnection.connect(port);
      try {
        sub.send('SSUBSCRIBE', 'app:events');
        sub.send('SUBSCRIBE', '__keyspace@0__:app:a', '__keyevent@0__:set');
        const seen = [await sub.read(), await sub.read(), await sub.read()];
        seen.push(await pub.call('SPUBLISH', 'app:events', 'hi'), await pub.call('SET', 'app:a', '1'));
        const messages = [await sub.read(), await sub.read(), await sub.read()].sort(); // shard channel and notifications: separate upstream connections
        return [...seen, ...messages];
      } finally {
        sub.close();
        pub.close();
      }
    };
    try {
      for (const proxy of [some, every]) {
        await Promise.all(primaries.map((n) => n.call('FLUSHALL')));
        await oracle.call('FLUSHALL');
        expect(await exchange(proxy.address.port)).toEqual(await exchange(oracle.port));
      }
    } finally {
      await Promise.all([oracle, ...primaries].map((n) => n.call('CONFIG', 'SET', 'notify-keyspace-events', '')));
    }
  });
});
