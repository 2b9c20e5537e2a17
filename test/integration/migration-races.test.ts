/**
 * A migration beside respool's other features and under a steady write load (found by
 * bench/migration.mjs): a write to a key the near cache holds is carried to the target too (both
 * wait for the same reply); a CUTOVER while writes are in flight drains them rather than holding
 * the event loop until cutoverMaxPauseMs; an ABORT while a SCAN batch is out leaves the target
 * empty and the migration aborted, not paused; of two STARTs at once, one is refused.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Valkey } from 'iovalkey';
import { startStandalone, type ValkeyNode } from '../harness/valkey-processes.js';
import type { RespoolProxy } from '../../src/server.js';
import { clientFor, startTestProxy } from '../helpers/proxy.js';
import { sleep, waitFor } from '../helpers/wait.js';

async function statusOf(client: Valkey, field: string): Promise<string> {
  const flat = (await client.call('RESPOOL', 'MIGRATE', 'STATUS')) as unknown[];
  return String(flat[flat.findIndex((v) => String(v) === field) + 1]);
}

describe('migration races', () => {
  const nodes: ValkeyNode[] = [];
  const proxies: RespoolProxy[] = [];
  const clients: Valkey[] = [];

  beforeAll(async () => {
    nodes.push(...(await Promise.all([0, 1, 2, 3, 4, 5].map(() => startStandalone()))));
  }, 60_000);

  afterAll(async () => {
    for (const c of clients) c.disconnect();
    await Promise.all(proxies.map((p) => p.close()));
    await Promise.all(nodes.map((n) => n.stop()));
  });

  it('a write to a key the near cache holds is carried to the target, and the cutover is not held by it', async () => {
    const [source, target] = [nodes[0]!, nodes[1]!];
    await source.call('SET', 'hot:1', 'v0');
    const proxy = await startTestProxy([{ host: '127.0.0.1', port: source.port }], { nearCache: { keys: ['hot:*'] } });
    proxies.push(proxy);
    const client = clientFor(proxy);
    clients.push(client);
    for (let i = 0; i < 3; i++) expect(await client.get('hot:1')).toBe('v0'); // cached
    expect(await client.call('RESPOOL', 'MIGRATE', 'START', target.address)).toBe('OK');
    await waitFor(async () => (await statusOf(client, 'state')) === 'synced', 'synced', 10_000, 20);
    expect(await client.set('hot:1', 'v1')).toBe('OK');
    expect(await client.set('hot:2', 'v1')).toBe('OK');
    await waitFor(async () => (await target.call('GET', 'hot:1')) === 'v1' && (await target.call('GET', 'hot:2')) === 'v1', 'the writes on the target', 5_000, 20);
    expect(String(await client.call('RESPOOL', 'MIGRATE', 'CUTOVER'))).toMatch(/^cut over: writes held [\d.]+ ms$/);
    expect(await client.get('hot:1')).toBe('v1');
  }, 30_000);

  it('CUTOVER under a steady pipelined write load drains the writes in flight, every time', async () => {
    // Source and target trade places each round: each CUTOVER is a fresh migration back.
    let [from, to] = [nodes[2]!, nodes[3]!];
    const proxy = await startTestProxy([{ host: '127.0.0.1', port: from.port }]);
    proxies.push(proxy);
    const admin = clientFor(proxy);
    const writers = [clientFor(proxy), clientFor(proxy), clientFor(proxy)];
    clients.push(admin, ...writers);
    let running = true;
    const told = new Map<string, number>();
    const loads = writers.map(async (w, n) => {
      for (let i = 0; running; i++) {
        const batch = Array.from({ length: 20 }, (_, j) => w.set(`w${n}:${j}`, String(i)).then(() => told.set(`w${n}:${j}`, i)));
        await Promise.all(batch);
      }
    });
    const pauses: number[] = [];
    for (let round = 0; round < 6; round++) {
      await to.call('FLUSHALL');
      expect(await admin.call('RESPOOL', 'MIGRATE', 'START', to.address)).toBe('OK');
      await waitFor(async () => (await statusOf(admin, 'state')) === 'synced', 'synced', 10_000, 10);
      const reply = String(await admin.call('RESPOOL', 'MIGRATE', 'CUTOVER'));
      expect(reply).toMatch(/^cut over: writes held [\d.]+ ms$/);
      pauses.push(Number(/held ([\d.]+) ms/.exec(reply)![1]));
      [from, to] = [to, from];
    }
    running = false;
    await Promise.all(loads);
    // Every key holds what its writer was last told, on the upstream respool now serves from.
    for (const [key, value] of told) expect(await from.call('GET', key)).toBe(String(value));
    console.log(`6 cutovers under 3 pipelined writers: writes held ${pauses.join(', ')} ms`);
    expect(Math.max(...pauses)).toBeLessThan(1_000); // not cutoverMaxPauseMs (2 s): nothing spun
  }, 90_000);

  it('two STARTs at once start one migration; ABORT while a SCAN batch is out: the target is empty and stays so, the migration aborted, START accepted again', async () => {
    const [source, target] = [nodes[4]!, nodes[5]!];
    const keys = Array.from({ length: 20_000 }, (_, i) => [`k${i}`, 'v']).flat();
    for (let i = 0; i < keys.length; i += 2_000) await source.call('MSET', ...keys.slice(i, i + 2_000));
    const proxy = await startTestProxy([{ host: '127.0.0.1', port: source.port }], { migration: { maxKeysPerSecond: 10_000_000, maxBytesPerSecond: 1024 ** 4 } });
    proxies.push(proxy);
    const client = clientFor(proxy);
    clients.push(client);
    // Two STARTs at once: one migration, the other refused.
    const both = await Promise.allSettled([client.call('RESPOOL', 'MIGRATE', 'START', target.address), client.call('RESPOOL', 'MIGRATE', 'START', target.address)]);
    expect(both.filter((r) => r.status === 'fulfilled').map((r) => (r as PromiseFulfilledResult<unknown>).value)).toEqual(['OK']);
    expect(String((both.find((r) => r.status === 'rejected') as PromiseRejectedResult).reason)).toMatch(/another START is being checked|a migration is \w+ already/);
    expect(String(await client.call('RESPOOL', 'MIGRATE', 'ABORT'))).toBe('aborted: the target was emptied');
    for (let round = 0; round < 10; round++) {
      expect(await client.call('RESPOOL', 'MIGRATE', 'START', target.address)).toBe('OK');
      await sleep(5 + ((round * 37) % 60));
      const reply = String(await client.call('RESPOOL', 'MIGRATE', 'ABORT'));
      expect(reply === 'aborted: the target was emptied' || reply === 'aborted').toBe(true);
      await sleep(100); // late RESTOREs would land by now
      expect(await statusOf(client, 'state')).toBe('aborted');
      expect(await target.call('DBSIZE')).toBe(0);
    }
  }, 90_000);
});
