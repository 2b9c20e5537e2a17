import { afterEach, describe, expect, it } from 'vitest';

import { startAdminServer, type AdminServer, type AdminState } from '../../src/admin/admin-server.js';
import { METRIC_KEYS, metricName } from '../../src/metrics/metric-definitions.js';
import { Metrics } from '../../src/metrics/metrics.js';

class FakeState implements AdminState {
  ready = false;
  reason = 'no topology yet';
  topo: unknown = { mode: 'cluster', nodes: new Map([['127.0.0.1:7000', { slots: [[0, 16383]] }]]), epoch: 3n };
  readiness(): { ready: boolean; reason?: string } {
    return this.ready ? { ready: true } : { ready: false, reason: this.reason };
  }
  topology(): unknown {
    return this.topo;
  }
}

const servers: AdminServer[] = [];

async function start(state: AdminState = new FakeState(), metrics = new Metrics()) {
  const admin = await startAdminServer({ host: '127.0.0.1', port: 0 }, metrics, state);
  servers.push(admin);
  const base = `http://127.0.0.1:${admin.address.port}`;
  return { admin, metrics, state, base };
}

afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

function touchEverything(m: Metrics): void {
  m.tenantsAtScrape(() => [{ name: 't', clients: 1, counts: { requests: 2, bytesIn: 30, bytesOut: 5, heldMs: 10, held: { ops: 1, bytes: 0, inflight: 0 }, refusedClients: 0 }, latencyUs: () => ({ p50: 300, p99: 900 }), shedOpsPerSecond: 50 }]);
  m.migrationAtScrape(() => ({ state: 'copying', copied: 5, mirrored: 2, recopied: 1, deleted: 0, verified: 0, mismatched: 0, bytes: 500, unseen_writes_per_second: 3, cutover_pause_ms: null }));
  m.clientConnections.inc();
  m.clientConnectionsAccepted.inc();
  m.connectionRejectedCounter('max_clients').inc();
  m.protocolErrors.inc();
  m.upstreamLinksGauge('127.0.0.1:7000', 'resp2', 'primary').inc();
  m.linkConnectCounter('127.0.0.1:7000', 'ok').inc();
  m.inflightGauge('127.0.0.1:7000').set(4);
  m.latencyHistogram('127.0.0.1:7000').observe(0.0003);
  m.commandCounter('get').inc();
  m.commandErrorCounter('get', 'server').inc();
  m.redirectCounter('moved').inc();
  m.retryCounter('tryagain').inc();
  m.topologyRefreshCounter('startup', 'ok').inc();
  m.topologyEpoch.set(1);
  m.slotsCovered.set(16384);
  // resilience (issue 4)
  m.raw.circuit_state.labels('127.0.0.1:7000').set(2);
  m.raw.circuit_opens_total.labels('127.0.0.1:7000').inc();
  m.raw.dial_budget_exhausted_total.labels('127.0.0.1:7000').inc();
  m.raw.retry_budget_exhausted_total.labels('127.0.0.1:7000').inc();
  m.raw.retry_outcomes_total.labels('ok').inc();
  m.raw.requests_shed_total.labels('node_down').inc();
  m.raw.client_disconnects_total.labels('idle_timeout').inc();
  m.raw.queue_depth.labels('accept').set(3);
  m.raw.upstream_inflight_bytes.set(100);
  m.raw.admission_wait_seconds.labels('bulk').observe(0.001);
  m.raw.park_wake_seconds.labels('127.0.0.1:7000').observe(0.0004);
  m.raw.admission_backlog_clients.labels('bulk').set(1);
  m.raw.admission_backlog_bytes.labels('bulk').set(1024);
  m.raw.upstream_link_inflight_requests.labels('127.0.0.1:7000', 'bulk').set(5);
  m.raw.client_buffered_bytes.labels('bulk', 'output').set(1);
  m.raw.memory_buffered_bytes.set(1);
  m.raw.memory_ceiling_bytes.set(0);
  // hot keys (issue 3)
  m.raw.hotkeys_node_request_share.labels('127.0.0.1:7000').set(0.9);
  m.raw.hotkeys_top_key_share.labels('1', 'hot').set(0.9);
  m.raw.hotkeys_top_key_requests_per_second.labels('1', 'hot').set(1000);
  m.raw.hotkeys_requests_per_second.set(1100);
  // leased connections (issue 8)
  m.leasedConnectionsGauge('127.0.0.1:7000', 'in_use').set(1);
  m.raw.split_keys.set(1);
  m.splitReads.copy++;
  m.raw.upstream_identity_links.labels('app').set(2);
  m.raw.acl_denials_total.labels('app', 'key').inc();
  m.raw.split_writes_total.labels('ok').inc();
  m.raw.split_repairs_total.labels('ok').inc();
  m.raw.split_refused_total.inc();
  // read strategies (issue 5)
  m.raw.reads_total.labels('azAffinity', 'same_zone_replica', '127.0.0.1:7001', 'az-a').inc();
  m.raw.zone_info.labels('az-a', 'config').set(1);
  // operations (issue 10)
  m.clientLatency('keyed').observe(0.0003);
  m.setCircuitStatus('127.0.0.1:7000', 'open');
  m.traffic.clientIn += 10;
  // what operators look at (issue 22)
  m.raw.node_saturated.labels('127.0.0.1:7000').set(1);
  m.raw.nodes_saturated_ratio.set(0.5);
  m.raw.node_cpu_utilization.labels('127.0.0.1:7000').set(0.95);
  m.raw.slowlog_entries_total.labels('slow').inc();
  m.raw.bigkeys_top_key_bytes.labels('1', '').set(1_048_576);
  // the near cache (issue 32): read off its counters at scrape time
  m.nearCacheAtScrape(() => ({ entries: 2, bytes: 300, hits: 5, misses: 1, coalesced: 3, passed_on: 0, invalidations: 1, evictions: 0 }));
}

describe('admin server', () => {
  it('binds an ephemeral port on loopback and reports it', async () => {
    const { admin } = await start();
    expect(admin.address.host).toBe('127.0.0.1');
    expect(admin.address.port).toBeGreaterThan(0);
    expect(admin.server.listening).toBe(true);
  });

  it('GET /healthz → 200 ok', async () => {
    const { base } = await start();
    const res = await fetch(`${base}/healthz`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
    expect((await res.text()).trim()).toBe('ok');
  });

  it('GET /metrics exposes every declared metric and the default process metrics', async () => {
    const { base, metrics } = await start();
    touchEverything(metrics);
    const res = await fetch(`${base}/metrics`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    const text = await res.text();
    for (const key of METRIC_KEYS) {
      const name = metricName(key);
      expect(text, name).toContain(`# TYPE ${name} `);
      // a sample line, not only the HELP/TYPE header
      expect(text, name).toMatch(new RegExp(`^${name}(_bucket|_sum|_count)?(\\{| )`, 'm'));
    }
    expect(text).toContain('respool_commands_total{command="get"} 1');
    expect(text).toContain('respool_command_errors_total{command="get",kind="server"} 1');
    expect(text).toContain('respool_upstream_latency_seconds_bucket{le="0.0005",node="127.0.0.1:7000"} 1');
    expect(text).toContain('respool_upstream_links{node="127.0.0.1:7000",protocol="resp2",role="primary"} 1');
    expect(text).toContain('respool_slots_covered 16384');
    // fixed vocabularies are exported at 0 before anything happens
    expect(text).toContain('respool_redirects_total{type="ask"} 0');
    expect(text).toContain('respool_topology_refreshes_total{trigger="periodic",outcome="failed"} 0');
    // prom-client default metrics, under their standard names
    expect(text).toMatch(/^process_cpu_user_seconds_total /m);
    expect(text).toMatch(/^nodejs_eventloop_lag_seconds /m);
    expect(text).not.toContain('respool_process_');
    // operations (issue 10)
    expect(text).toContain('respool_client_request_duration_seconds_bucket{le="0.0005",family="keyed"} 1');
    expect(text).toContain('respool_circuit_status{node="127.0.0.1:7000",state="open"} 1');
    expect(text).toContain('respool_circuit_status{node="127.0.0.1:7000",state="closed"} 0');
    expect(text).toContain('respool_client_bytes_total{direction="in"} 10');
    expect(text).toContain('respool_client_bytes_total{direction="out"} 0');
    expect(text).toContain('respool_config_last_reload_successful 1');
    expect(text).toMatch(/^respool_build_info\{version="\d+\.\d+\.\d+",node_version="v\d+\.\d+\.\d+"\} 1$/m);
  });

  it('GET /readyz follows the readiness state', async () => {
    const state = new FakeState();
    const { base } = await start(state);
    let res = await fetch(`${base}/readyz`);
    expect(res.status).toBe(503);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(await res.json()).toEqual({ ready: false, reason: 'no topology yet' });

    state.ready = true;
    res = await fetch(`${base}/readyz`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ ready: true });

    state.ready = false;
    state.reason = 'draining';
    res = await fetch(`${base}/readyz`);
    expect(res.status).toBe(503);
    expect(await res.json()).toEqual({ ready: false, reason: 'draining' });
  });

  it('GET /topology serializes the state as JSON (Maps and bigints included)', async () => {
    const { base } = await start();
    const res = await fetch(`${base}/topology`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(await res.json()).toEqual({
      mode: 'cluster',
      nodes: { '127.0.0.1:7000': { slots: [[0, 16383]] } },
      epoch: '3',
    });
  });

  it('unknown path → 404 JSON; other methods on a known path → 405 with Allow', async () => {
    const { base } = await start();
    let res = await fetch(`${base}/nope`);
    expect(res.status).toBe(404);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(await res.json()).toMatchObject({ error: 'not found' });

    for (const method of ['POST', 'PUT', 'DELETE']) {
      res = await fetch(`${base}/metrics`, { method });
      expect(res.status, method).toBe(405);
      expect(res.headers.get('allow')).toContain('GET');
      expect(res.headers.get('content-type')).toMatch(/^application\/json/);
      expect(await res.json()).toMatchObject({ error: 'method not allowed' });
    }
  });

  it('ignores the query string when matching and serves HEAD without a body', async () => {
    const { base } = await start();
    let res = await fetch(`${base}/healthz?verbose=1`);
    expect(res.status).toBe(200);
    res = await fetch(`${base}/healthz`, { method: 'HEAD' });
    expect(res.status).toBe(200);
    expect(await res.text()).toBe('');
  });

  it('a failing state or handler yields 500 JSON and the server keeps serving', async () => {
    const state: AdminState = {
      readiness: () => {
        throw new Error('boom');
      },
      topology: () => {
        const cyclic: Record<string, unknown> = {};
        cyclic['self'] = cyclic;
        return cyclic;
      },
    };
    const errors: unknown[] = [];
    const metrics = new Metrics({ defaultMetrics: false });
    const admin = await startAdminServer({ host: '127.0.0.1', port: 0 }, metrics, state, {
      onError: (err) => errors.push(err),
    });
    servers.push(admin);
    const base = `http://127.0.0.1:${admin.address.port}`;

    let res = await fetch(`${base}/readyz`);
    expect(res.status).toBe(500);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(await res.json()).toEqual({ error: 'boom' });
    expect(errors).toHaveLength(1);

    res = await fetch(`${base}/topology`);
    expect(res.status).toBe(500);
    expect((await res.json()) as { error: string }).toHaveProperty('error');

    admin.registerRoute('GET', '/async-fail', async () => {
      await new Promise((r) => setTimeout(r, 1));
      throw new Error('later');
    });
    res = await fetch(`${base}/async-fail`);
    expect(res.status).toBe(500);
    expect(await res.json()).toEqual({ error: 'later' });

    res = await fetch(`${base}/healthz`);
    expect(res.status).toBe(200);
  });

  it('routes can be added at start and later (e.g. /hotkeys)', async () => {
    const metrics = new Metrics({ defaultMetrics: false });
    const admin = await startAdminServer({ host: '127.0.0.1', port: 0 }, metrics, new FakeState(), {
      routes: [{ method: 'GET', path: '/version', handler: () => ({ status: 200, body: { version: '0.1.0' } }) }],
      token: () => 'test-admin-token-0123456789',
    });
    const auth = { authorization: 'Bearer test-admin-token-0123456789' };
    servers.push(admin);
    const base = `http://127.0.0.1:${admin.address.port}`;

    let res = await fetch(`${base}/version`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ version: '0.1.0' });

    res = await fetch(`${base}/hotkeys`);
    expect(res.status).toBe(404);
    admin.registerRoute('GET', '/hotkeys', (req) => ({
      status: 200,
      body: { top: Number(req.url.searchParams.get('top') ?? 10), keys: [] },
    }));
    admin.registerRoute('post', '/hotkeys', () => ({ status: 204 }));
    res = await fetch(`${base}/hotkeys?top=5`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ top: 5, keys: [] });
    res = await fetch(`${base}/hotkeys`, { method: 'POST', headers: auth });
    expect(res.status).toBe(204);
    res = await fetch(`${base}/hotkeys`, { method: 'DELETE', headers: auth });
    expect(res.status).toBe(405);
    expect(res.headers.get('allow')).toBe('GET, POST, HEAD');
  });

  it('two servers with their own Metrics do not share a registry', async () => {
    const a = await start(new FakeState(), new Metrics());
    const b = await start(new FakeState(), new Metrics());
    a.metrics.commandCounter('get').inc(5);
    b.metrics.commandCounter('get').inc(2);
    expect(await (await fetch(`${a.base}/metrics`)).text()).toContain('respool_commands_total{command="get"} 5');
    expect(await (await fetch(`${b.base}/metrics`)).text()).toContain('respool_commands_total{command="get"} 2');
  });

  it('close() resolves with keep-alive connections open and frees the port', async () => {
    const metrics = new Metrics({ defaultMetrics: false });
    const admin = await startAdminServer({ host: '127.0.0.1', port: 0 }, metrics, new FakeState());
    const base = `http://127.0.0.1:${admin.address.port}`;
    expect((await fetch(`${base}/healthz`)).status).toBe(200); // leaves a keep-alive socket
    await admin.close();
    await admin.close(); // idempotent
    expect(admin.server.listening).toBe(false);
    await expect(fetch(`${base}/healthz`)).rejects.toThrow();
  });

  it('rejects when the port is taken', async () => {
    const { admin } = await start();
    await expect(
      startAdminServer({ host: '127.0.0.1', port: admin.address.port }, new Metrics({ defaultMetrics: false }), new FakeState()),
    ).rejects.toThrow(/EADDRINUSE/);
  });
});
