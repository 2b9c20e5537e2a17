/**
 * The scan's pace follows the clients' latency (migration.paceByLatency, src/migration/latency-guard.ts):
 *
 *   - with clients before START, the guard takes their p99 and starts the scan at a tenth of
 *     maxKeysPerSecond; when their requests get slower (a relay adds 50 ms each way between respool
 *     and the source), the pace falls to its least (1%); once they are fast again, it grows back
 *   - a respool that served no request before START has no baseline: the scan runs at the ceiling
 *   - paceByLatency false: the ceiling, "off"
 */
import { afterAll, describe, expect, it } from 'vitest';
import { Valkey } from 'iovalkey';
import { startStandalone, type ValkeyNode } from '../harness/valkey-processes.js';
import { FaultRelay } from '../helpers/fault-relay.js';
import type { RespoolProxy } from '../../src/server.js';
import { clientFor, startTestProxy } from '../helpers/proxy.js';
import { sleep, waitFor } from '../helpers/wait.js';
import { migrateStatus as status } from '../helpers/migration.js';

const CEILING = 2_000;
const KEYS = 40_000;
/**
 * The rise the test allows (200%: to 3×), above a busy CI machine's noise between windows, so
 * that the relay's 100 ms decides; the decisions themselves are the unit tests'
 * (test/unit/latency-guard.test.ts).
 */
const RISE_PERCENT = 200;

describe('migration: the pace follows the clients\' p99', () => {
  const nodes: ValkeyNode[] = [];
  const proxies: RespoolProxy[] = [];
  const clients: Valkey[] = [];
  const relays: FaultRelay[] = [];

  afterAll(async () => {
    for (const c of clients) c.disconnect();
    await Promise.all(proxies.map((p) => p.close()));
    await Promise.all(relays.map((r) => r.close()));
    await Promise.all(nodes.map((n) => n.stop()));
  });

  async function sides(keys: number) {
    const [source, target] = await Promise.all([startStandalone(), startStandalone()]);
    nodes.push(source, target);
    const seeder = new Valkey({ host: '127.0.0.1', port: source.port });
    clients.push(seeder);
    for (let i = 0; i < keys; i += 1_000) {
      const pipe = seeder.pipeline();
      for (let j = i; j < Math.min(keys, i + 1_000); j++) pipe.set(`k:${j}`, `v${j}`);
      await pipe.exec();
    }
    return { source, target };
  }

  async function proxyFor(upstream: { host: string; port: number }, paceByLatency: boolean) {
    const proxy = await startTestProxy([upstream], { migration: { maxKeysPerSecond: CEILING, paceByLatency, maxP99RisePercent: RISE_PERCENT } });
    proxies.push(proxy);
    const client = clientFor(proxy);
    clients.push(client);
    return { proxy, client };
  }

  it('clients before START: a tenth of the ceiling; slower clients → 1%; fast again → it grows back', async () => {
    const { source, target } = await sides(KEYS);
    const relay = await FaultRelay.start({ host: '127.0.0.1', port: source.port });
    relays.push(relay);
    const { proxy, client } = await proxyFor({ host: '127.0.0.1', port: relay.port }, true);
    // Clients reading for the whole test: 64 loops of GETs through respool (enough requests each second with 100 ms added).
    let running = true;
    let reads = 0;
    const loops = Array.from({ length: 64 }, async () => {
      const c = clientFor(proxy);
      clients.push(c);
      while (running) {
        await c.get(`k:${reads % KEYS}`);
        reads++;
      }
    });
    try {
      await waitFor(() => reads > 3_000, 'the clients to get going', 10_000, 20);
      await sleep(2_200); // whole seconds of their requests: the guard's baseline

      expect(await client.call('RESPOOL', 'MIGRATE', 'START', target.address)).toBe('OK');
      const first = await status(client);
      expect(first.pace_guard).toBe('on');
      expect(Number(first.clients_p99_before_us)).toBeGreaterThan(0);
      expect(Number(first.pace_keys_per_second)).toBeLessThanOrEqual(CEILING * 0.125);

      // The clients' requests take 100 ms more: far past 3× their p99 before.
      relay.set({ delayMs: { toNode: 50, toClient: 50 } });
      await waitFor(async () => Number((await status(client)).pace_keys_per_second) === CEILING / 100, 'the pace at its least', 30_000, 100);
      const slow = await status(client);
      expect(slow.state).toBe('copying');
      expect(Number(slow.clients_p99_us)).toBeGreaterThan((1 + RISE_PERCENT / 100) * Number(slow.clients_p99_before_us));

      relay.set({ delayMs: { toNode: 0, toClient: 0 } });
      await waitFor(async () => Number((await status(client)).pace_keys_per_second) >= CEILING / 50, 'the pace growing back', 45_000, 100);
      expect((await status(client)).state).toBe('copying');
      expect(String(await client.call('RESPOOL', 'MIGRATE', 'ABORT'))).toMatch(/^aborted/);
    } finally {
      running = false;
      await Promise.all(loops);
    }
  });

  it('no request before START: no baseline, the ceiling; paceByLatency false: "off"', async () => {
    const { source, target } = await sides(5_000);
    const upstream = { host: '127.0.0.1', port: source.port };
    for (const paceByLatency of [true, false]) {
      const { client } = await proxyFor(upstream, paceByLatency);
      expect(await client.call('RESPOOL', 'MIGRATE', 'START', target.address)).toBe('OK');
      const s = await status(client);
      expect(s.pace_guard).toBe(paceByLatency ? 'no baseline' : 'off');
      expect(Number(s.pace_keys_per_second)).toBe(CEILING);
      expect(String(await client.call('RESPOOL', 'MIGRATE', 'ABORT'))).toMatch(/^aborted/);
    }
  });
});
