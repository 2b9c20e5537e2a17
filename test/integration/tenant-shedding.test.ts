/**
 * A saturated node slows the low-priority tenant first (issue 31): two tenants flood one
 * valkey-server through respool, with a saturation rule any busy node meets (saturation.cpuPercent
 * 1); the low-priority one is slowed (held for `shed`, RESPOOL TENANTS says to what rate and why,
 * the metric shows it), the high-priority one is not. How much it gives the node back:
 * bench/tenants.mjs.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Valkey } from 'iovalkey';
import { startStandalone, type ValkeyNode } from '../harness/valkey-processes.js';
import type { RespoolConfig } from '../../src/config/types.js';
import type { RespoolProxy } from '../../src/server.js';
import { startTestProxy } from '../helpers/proxy.js';
import { RawConnection } from '../helpers/raw-resp.js';

const NO_LIMITS = { opsPerSecond: null, bytesPerSecond: null, maxClients: null, maxInflight: null };

/** `clients` connections as `user`, each sending pipelines of 8 SETs for `ms`: requests answered per second. */
async function flood(port: number, user: string, password: string, ms: number, clients = 10): Promise<number> {
  const until = Date.now() + ms;
  let done = 0;
  await Promise.all(Array.from({ length: clients }, async (_, i) => {
    const c = new Valkey({ host: '127.0.0.1', port, username: user, password, maxRetriesPerRequest: 0 });
    try {
      while (Date.now() < until) {
        const p = c.pipeline();
        for (let k = 0; k < 8; k++) p.set(`k${i}:${k}`, 'v');
        await p.exec();
        done += 8;
      }
    } finally {
      c.disconnect();
    }
  }));
  return done / (ms / 1000);
}

describe('shedding by priority when a node saturates', () => {
  let server: ValkeyNode;
  let proxy: RespoolProxy;

  beforeAll(async () => {
    server = await startStandalone();
    proxy = await startTestProxy([{ host: server.host, port: server.port }], {
      tenants: [
        { name: 'batch', keyPrefix: 'batch:', upstream: null, priority: 0, limits: NO_LIMITS },
        { name: 'shop', keyPrefix: 'shop:', upstream: null, priority: 10, limits: NO_LIMITS },
      ],
      users: [
        { name: 'default', rules: 'on >admin +@all ~* &* +@respool-admin' },
        { name: 'bat', password: 'pb', tenant: 'batch' },
        { name: 'sho', password: 'ps', tenant: 'shop' },
      ],
      saturation: { p99Ms: 60_000, cpuPercent: 1, cpuSampleMs: 200 },
    } as unknown as Partial<RespoolConfig>);
  }, 30_000);

  afterAll(async () => {
    await proxy?.close();
    await server?.stop();
  });

  it('the low-priority tenant is slowed, the high-priority one is not, and RESPOOL TENANTS says why', async () => {
    const [batch, shop] = await Promise.all([flood(proxy.address.port, 'bat', 'pb', 3000), flood(proxy.address.port, 'sho', 'ps', 3000)]);
    console.log(`a saturated node: batch (priority 0) ${batch.toFixed(0)} SET/s, shop (priority 10) ${shop.toFixed(0)} SET/s`);
    const admin = await RawConnection.connect(proxy.address.port);
    try {
      expect(await admin.call('AUTH', 'default', 'admin')).toBe('+OK\r\n');
      const listing = await admin.call('RESPOOL', 'TENANTS');
      const held = (name: string) => Number(new RegExp(`\\$\\d+\\r\\n${name}\\r\\n[^]*?\\$9\\r\\nheld-shed\\r\\n:(\\d+)`).exec(listing)![1]);
      expect(held('batch')).toBeGreaterThan(0);
      expect(held('shop')).toBe(0);
      expect(batch).toBeLessThan(shop);
      const metrics = await proxy.metrics.registry.metrics();
      expect(metrics).toMatch(/respool_tenant_held_total\{tenant="batch",limit="shed"\} [1-9]/);
      // still slowed right after the flood (the cut grows back over a few periods): the reason names the node
      expect(listing).toMatch(/shed-reason\r\n\$\d+\r\n127\.0\.0\.1:\d+ saturated \(cpu/);
    } finally {
      admin.close();
    }
  }, 60_000);
});
