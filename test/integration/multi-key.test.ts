import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Valkey } from 'iovalkey';
import calculateSlot from 'cluster-key-slot';
import { startCluster, type ValkeyCluster, type ValkeyNode } from '../harness/valkey-processes.js';
import { rawPipeline } from '../harness/raw-client.js';
import type { RespoolProxy } from '../../src/server.js';
import { clientFor, startTestProxy } from '../helpers/proxy.js';
import { seededRandom } from '../helpers/test-data.js';

/** Keys spread over random slots (no hash tags). */
function randomKeys(prefix: string, n: number, seed: number): string[] {
  const rand = seededRandom(seed);
  return Array.from({ length: n }, (_, i) => `${prefix}:${i}:${Math.floor(rand() * 1e9)}`);
}

describe('cross-slot multi-key commands split by slot, in front of a 3+3 cluster', () => {
  let cluster: ValkeyCluster;
  let proxy: RespoolProxy;
  let client: Valkey;

  beforeAll(async () => {
    cluster = await startCluster({ primaries: 3, replicasPerPrimary: 1 });
    const seed = cluster.nodes[0]!;
    proxy = await startTestProxy([{ host: seed.host, port: seed.port }]);
    client = clientFor(proxy);
  });

  afterAll(async () => {
    client?.disconnect();
    await proxy?.close();
    await cluster?.stop();
  });

  it('MSET / MGET / EXISTS / TOUCH / DEL / UNLINK over 1,000 keys in random slots', async () => {
    const keys = randomKeys('mk', 1000, 7);
    expect(new Set(keys.map((k) => calculateSlot(k))).size).toBeGreaterThan(900);
    const pairs = keys.flatMap((k, i) => [k, `v${i}`]);
    expect(await client.mset(...pairs)).toBe('OK');
    const missing = 'mk:missing:no-such-key';
    const got = await client.mget(...keys.slice(0, 500), missing, ...keys.slice(500));
    expect(got).toEqual([...keys.slice(0, 500).map((_, i) => `v${i}`), null, ...keys.slice(500).map((_, i) => `v${i + 500}`)]);
    // duplicates are counted as Valkey counts them
    expect(await client.exists(...keys, keys[0]!, missing)).toBe(1001);
    expect(await client.call('TOUCH', ...keys.slice(0, 300), missing)).toBe(300);
    expect(await client.del(...keys.slice(0, 400), missing)).toBe(400);
    expect(await client.unlink(...keys.slice(400))).toBe(600);
    expect(await client.exists(...keys)).toBe(0);
    // every primary saw part of it: the keys really were spread
    for (const node of await cluster.primaries()) expect(Number(await cluster.call(node, 'DBSIZE'))).toBe(0);
  });

  it('keeps reply order in a pipeline of split and plain commands', async () => {
    const keys = randomKeys('pipe', 50, 11);
    const pipe = client.pipeline();
    for (let round = 0; round < 20; round++) {
      pipe.mset(...keys.flatMap((k) => [k, `r${round}`]));
      pipe.get(keys[round]!);
      pipe.mget(...keys);
      pipe.incr(`pipe:counter`);
      pipe.exists(...keys);
    }
    const results = (await pipe.exec())!;
    for (let round = 0; round < 20; round++) {
      const [mset, get, mget, incr, exists] = results.slice(round * 5, round * 5 + 5).map(([err, v]) => {
        expect(err).toBeNull();
        return v;
      });
      expect(mset).toBe('OK');
      expect(get).toBe(`r${round}`);
      expect(mget).toEqual(keys.map(() => `r${round}`));
      expect(incr).toBe(round + 1);
      expect(exists).toBe(50);
    }
  });

  it('one slot: the plain path (same bytes as the node); commands that cannot be split keep CROSSSLOT', async () => {
    const replies = await rawPipeline(proxy.address.port, [
      ['MSET', '{t}a', '1', '{t}b', '2'],
      ['MGET', '{t}a', '{t}b', '{t}c'],
      ['MSETNX', 'x1', '1', 'y1', '2'],
      ['SMOVE', 'x1', 'y1', 'm'],
      ['RENAME', 'x1', 'y1'],
    ]);
    expect(replies[0]).toBe('OK');
    expect(replies[1]).toEqual(['1', '2', null]);
    for (const r of replies.slice(2)) expect(String(r)).toMatch(/CROSSSLOT Keys in request don't hash to the same slot/);
  });

  it('follows MOVED and ASK per part during a live slot migration', async () => {
    const tagged = Array.from({ length: 20 }, (_, i) => `{mig}:${i}`);
    const slot = calculateSlot(tagged[0]!);
    const others = randomKeys('mig-other', 20, 3);
    await client.mset(...tagged.flatMap((k) => [k, 'before']), ...others.flatMap((k) => [k, 'o']));
    const source = await cluster.primaryForSlot(slot);
    const target = (await cluster.primaries()).find((p) => p.port !== source.port)!;
    const id = async (n: ValkeyNode) => String(await cluster.call(n, 'CLUSTER', 'MYID'));
    await cluster.call(target, 'CLUSTER', 'SETSLOT', slot, 'IMPORTING', await id(source));
    await cluster.call(source, 'CLUSTER', 'SETSLOT', slot, 'MIGRATING', await id(target));
    await cluster.call(source, 'MIGRATE', target.host, target.port, '', 0, 5000, 'KEYS', ...tagged.slice(0, 10));
    // half of the slot's keys moved: MGET of a moved key gets ASK on its part
    expect(await client.mget(tagged[0]!, ...others)).toEqual(['before', ...others.map(() => 'o')]);
    await cluster.call(source, 'MIGRATE', target.host, target.port, '', 0, 5000, 'KEYS', ...tagged.slice(10));
    for (const node of await cluster.primaries()) await cluster.call(node, 'CLUSTER', 'SETSLOT', slot, 'NODE', await id(target));
    // the slot is the target's: MOVED on that part, the other parts unaffected
    expect(await client.mget(...tagged, ...others)).toEqual([...tagged.map(() => 'before'), ...others.map(() => 'o')]);
    expect(await client.del(...tagged, ...others)).toBe(40);
  });

  it('a part on a killed primary fails with one error naming the part; the other parts ran', async () => {
    const keys = randomKeys('kill', 60, 5);
    await client.mset(...keys.flatMap((k) => [k, 'x']));
    const victim = (await cluster.primaries())[1]!;
    const onVictim = new Set<string>();
    for (const k of keys) if ((await cluster.primaryForSlot(calculateSlot(k))).port === victim.port) onVictim.add(k);
    expect(onVictim.size).toBeGreaterThan(0);
    await cluster.killNode(victim);
    const error = await client.del(...keys).catch((e: Error) => e);
    expect(String(error)).toMatch(/ERR respool: DEL was split by slot into \d+ parts; part \d+ \(slot \d+\) failed: .*; \d+ of the other \d+ parts succeeded and were not undone/);
    // the parts on the live primaries ran: their keys are gone
    for (const k of keys) if (!onVictim.has(k)) expect(await client.exists(k), k).toBe(0);
  });
});
