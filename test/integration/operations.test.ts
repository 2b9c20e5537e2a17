import { Writable } from 'node:stream';
import calculateSlot from 'cluster-key-slot';
import { pino } from 'pino';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_CONFIG } from '../../src/config/defaults.js';
import type { RespoolConfig } from '../../src/config/types.js';
import { startProxy, type RespoolProxy } from '../../src/server.js';
import { startCluster, type ValkeyCluster } from '../harness/valkey-processes.js';
import { clientFor } from '../helpers/proxy.js';
import type { Valkey } from 'iovalkey';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Every JSON log line respool wrote, parsed. */
function captureLog() {
  const lines: Array<Record<string, unknown>> = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const l of chunk.toString().split('\n')) if (l.trim() !== '') lines.push(JSON.parse(l) as Record<string, unknown>);
      done();
    },
  });
  return { lines, log: pino({ level: 'info' }, stream) };
}

async function getJson(url: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await request(url);
  return { status: res.statusCode, body: (await res.body.json()) as Record<string, unknown> };
}

async function until<T>(what: string, fn: () => Promise<T | undefined> | T | undefined, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

describe('operations: /readyz and event lines when a primary dies and fails over', () => {
  let cluster: ValkeyCluster;
  let proxy: RespoolProxy;
  let client: Valkey;
  const captured = captureLog();

  beforeAll(async () => {
    cluster = await startCluster({ primaries: 3, replicasPerPrimary: 1, nodeTimeoutMs: 3000 });
    const base = structuredClone(DEFAULT_CONFIG) as RespoolConfig;
    const config: RespoolConfig = {
      ...base,
      listen: { host: '127.0.0.1', port: 0 },
      admin: { host: '127.0.0.1', port: 0 },
      upstreams: cluster.nodes.slice(0, 2).map((n) => ({ host: n.host, port: n.port })),
      cluster: { ...base.cluster, refreshPeriodMs: 1000, refreshMinIntervalMs: 100 },
    };
    proxy = await startProxy(config, { log: captured.log });
    client = clientFor(proxy);
  }, 60_000);

  afterAll(async () => {
    client?.disconnect();
    await proxy?.close();
    await cluster?.stop();
  });

  it('is ready with every primary up; 503 naming the dead primary and its slots; 200 after failover', async () => {
    const admin = `http://127.0.0.1:${proxy.adminAddress!.port}`;
    expect((await getJson(`${admin}/readyz`)).body).toEqual({ ready: true });

    const shards = await cluster.shards();
    const victimShard = shards[1]!;
    const victim = victimShard.primary;
    // A key on every shard, so links to every primary are open before the kill.
    const keys = new Map<number, string>();
    for (let i = 0; keys.size < shards.length; i++) {
      const owner = (await cluster.primaryForSlot(calculateSlot(`ops${i}`))).port;
      if (!keys.has(owner)) keys.set(owner, `ops${i}`);
    }
    for (const key of keys.values()) expect(await client.set(key, 'v')).toBe('OK');
    // Replication is asynchronous: the victim's write must be on its replica before the kill, or
    // the promoted replica may not have it (seen once in CI: GET after failover answered nil).
    expect(await client.call('WAIT', '1', '2000')).toBe(1);
    const victimKey = keys.get(victim.port)!;

    // Metrics: client latency per family, bytes both ways, build info, circuits, standard process metrics.
    await client.ping();
    await client.mget(...keys.values()); // cross-slot: multiKey
    const metricsText = await (await request(`${admin}/metrics`)).body.text();
    const value = (re: RegExp) => Number(re.exec(metricsText)?.[1] ?? NaN);
    expect(value(/^respool_client_request_duration_seconds_count\{family="keyed"\} (\d+)/m)).toBeGreaterThanOrEqual(3);
    expect(value(/^respool_client_request_duration_seconds_count\{family="local"\} (\d+)/m)).toBeGreaterThanOrEqual(1);
    expect(value(/^respool_client_request_duration_seconds_count\{family="multiKey"\} (\d+)/m)).toBe(1);
    for (const name of ['client_bytes_total{direction="in"}', 'client_bytes_total{direction="out"}', 'upstream_bytes_total{direction="in"}', 'upstream_bytes_total{direction="out"}']) {
      expect(value(new RegExp(`^respool_${name.replace(/[{}]/g, '\\$&')} (\\d+)`, 'm')), name).toBeGreaterThan(0);
    }
    expect(metricsText).toMatch(/^respool_build_info\{version="[^"]+",node_version="v[^"]+"\} 1$/m);
    expect(metricsText).toContain(`respool_circuit_status{node="${victim.address}",state="closed"} 1`);
    expect(metricsText).toMatch(/^process_resident_memory_bytes \d+/m);

    await cluster.killNode(victim);
    // Traffic toward the dead node makes respool dial it (probes), which opens its circuit.
    let stopTraffic = false;
    const traffic = (async () => {
      while (!stopTraffic) {
        await client.get(victimKey).catch(() => undefined);
        await sleep(20);
      }
    })();

    const notReady = await until('/readyz 503', async () => {
      const r = await getJson(`${admin}/readyz`);
      return r.status === 503 ? r : undefined;
    }, 10_000);
    const slots = victimShard.slots.map(([a, b]) => (a === b ? String(a) : `${a}-${b}`)).join(',');
    expect(notReady.body['ready']).toBe(false);
    expect(notReady.body['unreachable']).toEqual([expect.objectContaining({ node: victim.address, slots })]);
    expect(String(notReady.body['reason'])).toContain(`primary ${victim.address} (slots ${slots}) unreachable`);
    // /healthz is liveness: still 200.
    const health = await request(`${admin}/healthz`);
    await health.body.text();
    expect(health.statusCode).toBe(200);

    const events = (kind: string) => captured.lines.filter((l) => l['event'] === kind && l['node'] === victim.address);
    await until('node_lost and circuit_open lines', () => (events('node_lost').length > 0 && events('circuit_open').length > 0 ? true : undefined), 10_000);
    expect(events('node_lost')[0]).toMatchObject({ level: 40, node: victim.address });
    expect(events('circuit_open')[0]).toMatchObject({ level: 40, node: victim.address });
    expect(events('circuit_open')[0]!['msg']).toMatch(/circuit to .* opened/);
    // Rate limited: a storm of probes and sheds writes few lines.
    expect(events('node_lost').length).toBeLessThanOrEqual(3);

    await cluster.waitForStable({ timeoutMs: 30_000 }); // the replica took over
    await until('/readyz 200 after failover', async () => ((await getJson(`${admin}/readyz`)).status === 200 ? true : undefined), 30_000);
    stopTraffic = true;
    await traffic;
    expect(await client.get(victimKey)).toBe('v');
    const change = captured.lines.find((l) => l['event'] === 'topology_changed' && Array.isArray(l['roleChanges']) && (l['roleChanges'] as string[]).some((r) => r.endsWith('→primary')));
    expect(change).toBeDefined();
    expect(change!['slotsMoved']).toBeGreaterThan(0);
    expect(typeof change!['epoch']).toBe('number');
  }, 90_000);
});
