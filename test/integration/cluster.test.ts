import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { Valkey } from 'iovalkey';
import calculateSlot from 'cluster-key-slot';
import { startCluster, type ValkeyCluster } from '../harness/valkey-processes.js';
import type { RespoolProxy } from '../../src/server.js';
import { clientFor, startTestProxy } from '../helpers/proxy.js';
import { exerciseDataTypes } from '../helpers/data-types.js';
import { RawConnection } from '../helpers/raw-resp.js';

const run = promisify(execFile);

/** Connections the cluster's nodes see from respool (CLIENT SETNAME respool on every link). */
async function respoolLinksPerNode(cluster: ValkeyCluster): Promise<Map<number, number>> {
  const out = new Map<number, number>();
  for (const node of cluster.nodes) {
    const list = String(await cluster.call(node, 'CLIENT', 'LIST'));
    out.set(node.port, list.split('\n').filter((line) => / name=respool /.test(line)).length);
  }
  return out;
}

describe('respool in front of a 3-primary, 3-replica cluster', () => {
  let cluster: ValkeyCluster;
  let proxy: RespoolProxy;
  let client: Valkey;

  beforeAll(async () => {
    cluster = await startCluster({ primaries: 3, replicasPerPrimary: 1 });
    const seed = cluster.nodes[0]!;
    proxy = await startTestProxy([{ host: seed.host, port: seed.port }], { connectionsPerNode: 2 });
    client = clientFor(proxy);
  });

  afterAll(async () => {
    client?.disconnect();
    await proxy?.close();
    await cluster?.stop();
  });

  it('discovers the cluster: 3 shards with replicas, every slot covered', () => {
    const topology = proxy.refresher.current!;
    expect(topology.mode).toBe('cluster');
    expect(topology.shards).toHaveLength(3);
    expect(topology.coveredSlots()).toBe(16384);
    for (const shard of topology.shards) expect(shard.replicas).toHaveLength(1);
  });

  it('serves single-key commands of every data type to a non-cluster client', async () => {
    for (const prefix of ['a', 'b', 'c', 'd']) await exerciseDataTypes(client, `cl-${prefix}`);
  });

  it('keeps reply order over a pipeline of 1,000 commands across all slots', async () => {
    const keys = Array.from({ length: 1000 }, (_, i) => `order:${i}`);
    const nodesUsed = new Set(keys.map((k) => proxy.refresher.current!.primaryForSlot(calculateSlot(k))!.address));
    expect(nodesUsed.size).toBe(3);
    const writes = client.pipeline();
    keys.forEach((k, i) => writes.set(k, `value-${i}`));
    expect((await writes.exec())!.every(([err, v]) => err === null && v === 'OK')).toBe(true);
    const reads = client.pipeline();
    keys.forEach((k, i) => (i % 2 ? reads.get(k) : reads.strlen(k)));
    const results = await reads.exec();
    results!.forEach(([err, value], i) => {
      expect(err).toBeNull();
      expect(value).toBe(i % 2 ? `value-${i}` : `value-${i}`.length);
    });
  });

  it('routes same-slot multi-key commands, splits MGET by slot, refuses unsplittable cross-slot ones with CROSSSLOT', async () => {
    expect(await client.mset('{user1}:a', '1', '{user1}:b', '2')).toBe('OK');
    expect(await client.mget('{user1}:a', '{user1}:b')).toEqual(['1', '2']);
    await client.set('split:order:1', 'a');
    expect(await client.mget('split:order:1', 'split:order:2')).toEqual(['a', null]);
    await expect(client.call('RENAME', 'order:1', 'order:2')).rejects.toThrow(/CROSSSLOT/);
  });

  it('carries 1,000 concurrent clients over at most connectionsPerNode links per node', async () => {
    const clients = Array.from({ length: 1000 }, () => clientFor(proxy));
    await Promise.all(
      clients.map(async (c, i) => {
        await c.set(`conc:${i}`, String(i));
        expect(await c.get(`conc:${i}`)).toBe(String(i));
      }),
    );
    expect(proxy.clientCount()).toBeGreaterThanOrEqual(1000);
    const links = await respoolLinksPerNode(cluster);
    const primaries = new Set((await cluster.primaries()).map((p) => p.port));
    for (const [port, count] of links) {
      expect(count, `links on ${port}`).toBeLessThanOrEqual(2);
      // One link carries everything while it keeps up; a second opens only when it is backed up (NodePool.placeFor).
      if (primaries.has(port)) expect(count, `links on primary ${port}`).toBeGreaterThanOrEqual(1);
    }
    clients.forEach((c) => c.disconnect());
  });

  it('speaks RESP3 after HELLO 3, on RESP3 links', async () => {
    const raw = await RawConnection.connect(proxy.address.port);
    const hello = await raw.call('HELLO', '3');
    expect(hello.startsWith('%')).toBe(true);
    expect(hello).toContain('proto\r\n:3');
    expect(await raw.call('HSET', 'r3:h', 'f', 'v')).toBe(':1\r\n');
    expect(await raw.call('HGETALL', 'r3:h')).toBe('%1\r\n$1\r\nf\r\n$1\r\nv\r\n');
    expect(await raw.call('GET', 'r3:missing')).toBe('_\r\n');
    raw.close();
    const { stdout } = await run('valkey-cli', ['-3', '-p', String(proxy.address.port), 'HGETALL', 'r3:h']);
    expect(stdout).toMatch(/f.*v/s);
  });

  it("allows only SELECT 0, with Valkey's own errors (cluster mode)", async () => {
    const viaProxy = await RawConnection.connect(proxy.address.port);
    const viaNode = await RawConnection.connect(cluster.nodes[0]!.port);
    try {
      const script = [['SELECT', '0'], ['SELECT', '1'], ['SELECT', '-1'], ['SELECT', 'abc'], ['SELECT', '3000000000'], ['SELECT'], ['MULTI'], ['SELECT', '1'], ['SELECT', '0'], ['EXEC']];
      for (const args of script) {
        const fromProxy = await viaProxy.call(...args);
        expect(fromProxy, args.join(' ')).toBe(await viaNode.call(...args));
      }
      expect(await viaProxy.call('SELECT', '1')).toBe('-ERR SELECT is not allowed in cluster mode\r\n');
      expect(await viaProxy.call('CLIENT', 'INFO')).toMatch(/ db=0 /);
    } finally {
      viaProxy.close();
      viaNode.close();
    }
  });

  it('answers malformed RESP with a protocol error and closes only that client', async () => {
    const other = clientFor(proxy);
    expect(await other.ping()).toBe('PONG');
    const bad = await RawConnection.connect(proxy.address.port);
    bad.write('*2\r\n$3\r\nGET\r\n$abc\r\n');
    expect(await bad.read()).toMatch(/^-ERR Protocol error: invalid bulk length/);
    await bad.waitClosed();
    const huge = await RawConnection.connect(proxy.address.port);
    huge.write('*1\r\n$999999999999\r\n');
    expect(await huge.read()).toMatch(/^-ERR Protocol error/);
    await huge.waitClosed();
    expect(await other.get('order:1')).toBe('value-1');
    other.disconnect();
  });

  it('works with valkey-cli as a plain standalone client', async () => {
    const port = String(proxy.address.port);
    expect((await run('valkey-cli', ['-p', port, 'SET', 'cli:x', '42'])).stdout.trim()).toBe('OK');
    expect((await run('valkey-cli', ['-p', port, 'INCR', 'cli:x'])).stdout.trim()).toBe('43');
    expect((await run('valkey-cli', ['-p', port, 'GET', 'order:999'])).stdout.trim()).toBe('value-999');
  });

  it('exposes metrics, health, readiness and topology over HTTP', async () => {
    const admin = await startTestProxy([{ host: cluster.nodes[0]!.host, port: cluster.nodes[0]!.port }], {
      admin: { host: '127.0.0.1', port: 0 },
    });
    try {
      const base = `http://127.0.0.1:${admin.adminAddress!.port}`;
      const c = clientFor(admin);
      await c.set('m:1', 'x');
      await c.get('m:1');
      c.disconnect();
      expect((await fetch(`${base}/healthz`)).status).toBe(200);
      const ready = await fetch(`${base}/readyz`);
      expect(ready.status).toBe(200);
      const topology = (await (await fetch(`${base}/topology`)).json()) as { topology: { coveredSlots: number; shards: unknown[] } };
      expect(topology.topology.coveredSlots).toBe(16384);
      expect(topology.topology.shards).toHaveLength(3);
      const metrics = await (await fetch(`${base}/metrics`)).text();
      expect(metrics).toMatch(/respool_commands_total\{command="set"\} 1/);
      expect(metrics).toMatch(/respool_upstream_latency_seconds_count\{node="127\.0\.0\.1:\d+"\} [1-9]/);
      expect(metrics).toMatch(/respool_upstream_links\{node="127\.0\.0\.1:\d+",protocol="resp2",role="primary"\} [12]/);
      expect(metrics).toMatch(/respool_upstream_io_total\{op="writes"\} [1-9]/);
      expect(metrics).toMatch(/respool_client_connections 0/);
    } finally {
      await admin.close();
    }
  });
});
