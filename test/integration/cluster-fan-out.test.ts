import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type { Valkey } from 'iovalkey';
import { startCluster, type ValkeyCluster } from '../harness/valkey-processes.js';
import type { RespoolProxy } from '../../src/server.js';
import { clientFor, startTestProxy } from '../helpers/proxy.js';
import { RawConnection } from '../helpers/raw-resp.js';

const run = promisify(execFile);

describe('whole-data-set commands fan out over the shards (3 primaries + 3 replicas)', () => {
  let cluster: ValkeyCluster;
  let proxy: RespoolProxy;
  let client: Valkey;
  const keys = Array.from({ length: 300 }, (_, i) => `fan:${i}`);

  beforeAll(async () => {
    cluster = await startCluster({ primaries: 3, replicasPerPrimary: 1 });
    proxy = await startTestProxy([{ host: cluster.nodes[0]!.host, port: cluster.nodes[0]!.port }]);
    // SCRIPT LOAD goes to the nodes respool knows: wait until its topology has every replica
    // (a replica still joining when respool first asked is found by the next refresh).
    const deadline = Date.now() + 10_000;
    while ((proxy.refresher.current?.allNodes().length ?? 0) < cluster.nodes.length && Date.now() < deadline) {
      await proxy.refresher.refreshNow('periodic');
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(proxy.refresher.current!.allNodes()).toHaveLength(cluster.nodes.length);
    client = clientFor(proxy);
    const pipeline = client.pipeline();
    for (const k of keys) pipeline.set(k, 'v');
    await pipeline.exec();
  });

  afterAll(async () => {
    client?.disconnect();
    await proxy?.close();
    await cluster?.stop();
  });

  async function dbsizeOfPrimaries(): Promise<number[]> {
    return Promise.all((await cluster.primaries()).map(async (p) => Number(await cluster.call(p, 'DBSIZE'))));
  }

  it('DBSIZE sums the primaries', async () => {
    const perNode = await dbsizeOfPrimaries();
    expect(perNode.filter((n) => n > 0).length).toBe(3);
    expect(await client.dbsize()).toBe(perNode.reduce((a, b) => a + b, 0));
    expect(await client.dbsize()).toBe(300);
  });

  it('KEYS concatenates every shard’s matches', async () => {
    const found = await client.keys('fan:*');
    expect(found.sort()).toEqual([...keys].sort());
  });

  it('SCAN walks every shard with one cursor and returns each key once', async () => {
    const seen: string[] = [];
    let cursor = '0';
    let calls = 0;
    do {
      const [next, batch] = await client.scan(cursor, 'MATCH', 'fan:*', 'COUNT', 50);
      seen.push(...batch);
      cursor = next;
      calls++;
    } while (cursor !== '0' && calls < 1000);
    expect(cursor).toBe('0');
    expect(new Set(seen).size).toBe(300);
    expect(seen.sort()).toEqual([...keys].sort());
    await expect(client.scan('-1')).rejects.toThrow(/invalid cursor/);
  });

  it('SCRIPT LOAD reaches every node, so EVALSHA works on any shard; SCRIPT EXISTS ANDs', async () => {
    const sha = (await client.script('LOAD', 'return 1')) as string;
    for (const node of cluster.nodes) {
      expect(await cluster.call(node, 'SCRIPT', 'EXISTS', sha)).toEqual([1]);
    }
    expect(await client.script('EXISTS', sha, '0000000000000000000000000000000000000000')).toEqual([1, 0]);
  });

  it('RANDOMKEY answers a key when any shard has one', async () => {
    expect(keys).toContain(await client.randomkey());
  });

  it('keeps order when fan-out commands are pipelined between keyed ones', async () => {
    const raw = await RawConnection.connect(proxy.address.port);
    raw.send('GET', 'fan:1');
    raw.send('DBSIZE');
    raw.send('ECHO', 'x');
    raw.send('GET', 'fan:2');
    expect(await raw.read()).toBe('$1\r\nv\r\n');
    expect(await raw.read()).toBe(':300\r\n');
    expect(await raw.read()).toBe('$1\r\nx\r\n');
    expect(await raw.read()).toBe('$1\r\nv\r\n');
    raw.close();
  });

  it('FLUSHALL empties every shard (valkey-cli)', async () => {
    const { stdout } = await run('valkey-cli', ['-p', String(proxy.address.port), 'FLUSHALL']);
    expect(stdout.trim()).toBe('OK');
    expect(await dbsizeOfPrimaries()).toEqual([0, 0, 0]);
    expect((await run('valkey-cli', ['-p', String(proxy.address.port), 'DBSIZE'])).stdout.trim()).toBe('0');
  });
});
