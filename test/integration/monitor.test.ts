import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Valkey } from 'iovalkey';
import { startCluster, type ValkeyCluster } from '../harness/valkey-processes.js';
import type { RespoolProxy } from '../../src/server.js';
import { clientFor, startTestProxy } from '../helpers/proxy.js';

describe('MONITOR through respool in front of a 3-primary cluster', () => {
  let cluster: ValkeyCluster;
  let proxy: RespoolProxy;
  const clients: Valkey[] = [];

  beforeAll(async () => {
    cluster = await startCluster({ primaries: 3, replicasPerPrimary: 0 });
    const seed = cluster.nodes[0]!;
    proxy = await startTestProxy([{ host: seed.host, port: seed.port }]);
  });

  afterAll(async () => {
    for (const c of clients) c.disconnect();
    await proxy?.close();
    await cluster?.stop();
  });

  it('streams every node\'s commands to the monitoring client, and frees its leases on close', async () => {
    const monitor = clientFor(proxy);
    clients.push(monitor);
    const lines: string[] = [];
    const stream = await monitor.monitor();
    stream.on('monitor', (_time: string, args: string[]) => lines.push(args.join(' ')));
    const writer = clientFor(proxy);
    clients.push(writer);
    // keys in slots owned by each of the three primaries
    const keys = ['mon:a', 'mon:b', 'mon:c', 'mon:d', 'mon:e', 'mon:f'];
    for (const k of keys) await writer.set(k, 'v');
    const deadline = Date.now() + 5000;
    while (keys.some((k) => !lines.includes(`set ${k} v`)) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    for (const k of keys) expect(lines, k).toContain(`set ${k} v`);
    expect(await leased(proxy)).toBe(3); // one leased connection per node
    stream.disconnect();
    const until = Date.now() + 5000;
    while ((await leased(proxy)) > 0 && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
    expect(await leased(proxy)).toBe(0);
  });
});

/** Leased connections in use, from respool's own metrics. */
async function leased(proxy: RespoolProxy): Promise<number> {
  const text = await proxy.metrics.render();
  let total = 0;
  for (const m of text.matchAll(/^respool_leased_connections\{[^}]*state="in_use"[^}]*\} (\d+)/gm)) total += Number(m[1]);
  return total;
}
