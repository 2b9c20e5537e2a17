import { describe, expect, it } from 'vitest';

import {
  LATENCY_BUCKETS_SECONDS,
  METRIC_DEFINITIONS,
  METRIC_KEYS,
  metricName,
} from '../../src/metrics/metric-definitions.js';
import { Metrics, commandLabelFor } from '../../src/metrics/metrics.js';

async function valueOf(m: Metrics, key: keyof typeof METRIC_DEFINITIONS, labels: Record<string, string>): Promise<number | undefined> {
  const data = await m.registry.getSingleMetric(metricName(key))!.get();
  const hit = data.values.find((v) =>
    Object.entries(labels).every(([k, val]) => (v.labels as Record<string, unknown>)[k] === val) &&
    Object.keys(v.labels).length === Object.keys(labels).length,
  );
  return hit?.value;
}

describe('metric definitions', () => {
  it('every metric is registered with its declared type, help and labels', async () => {
    const m = new Metrics({ defaultMetrics: false });
    for (const key of METRIC_KEYS) {
      const def = METRIC_DEFINITIONS[key];
      const metric = m.registry.getSingleMetric(metricName(key));
      expect(metric, key).toBeDefined();
      const data = await metric!.get();
      expect(data.type, key).toBe(def.type);
      expect(data.help, key).toBe(def.help);
    }
    expect(m.registry.getMetricsAsArray()).toHaveLength(METRIC_KEYS.length);
  });

  it('names are prefixed, snake_case, counters end in _total', () => {
    for (const key of METRIC_KEYS) {
      expect(metricName(key)).toMatch(/^respool_[a-z][a-z0-9_]*$/);
      if (METRIC_DEFINITIONS[key].type === 'counter') expect(key).toMatch(/_total$/);
    }
  });

  it('upstream latency uses 50µs…2.5s buckets', async () => {
    const m = new Metrics({ defaultMetrics: false });
    m.latencyHistogram('n1').observe(0.00004);
    const text = await m.render();
    for (const b of LATENCY_BUCKETS_SECONDS) {
      expect(text).toContain(`respool_upstream_latency_seconds_bucket{le="${b}",node="n1"} 1`);
    }
    expect(LATENCY_BUCKETS_SECONDS[0]).toBe(0.00005);
    expect(LATENCY_BUCKETS_SECONDS[LATENCY_BUCKETS_SECONDS.length - 1]).toBe(2.5);
  });

  it('default process metrics are registered under their standard names unless disabled', async () => {
    const on = new Metrics();
    expect(on.registry.getSingleMetric('process_cpu_user_seconds_total')).toBeDefined();
    expect(on.registry.getSingleMetric('nodejs_eventloop_lag_seconds')).toBeDefined();
    const off = new Metrics({ defaultMetrics: false });
    expect(off.registry.getSingleMetric('process_cpu_user_seconds_total')).toBeUndefined();
  });
});

describe('command label bounding', () => {
  it('commandLabelFor maps unknown names to "unknown"', () => {
    const known = new Set(['get', 'set', 'client|setname']);
    expect(commandLabelFor('get', known)).toBe('get');
    expect(commandLabelFor('client|setname', known)).toBe('client|setname');
    expect(commandLabelFor('nosuchcmd', known)).toBe('unknown');
  });

  it('with knownCommands, only those names become labels', async () => {
    const m = new Metrics({ defaultMetrics: false, knownCommands: ['get', 'set'] });
    m.commandCounter('get').inc();
    m.commandCounter('bogus').inc();
    m.commandCounter('x'.repeat(1000)).inc();
    m.commandCounter('GET').inc(); // caller must lower-case; upper case is not a known name
    expect(await valueOf(m, 'commands_total', { command: 'get' })).toBe(1);
    expect(await valueOf(m, 'commands_total', { command: 'unknown' })).toBe(3);
    const data = await m.raw.commands_total.get();
    expect(data.values.map((v) => v.labels['command']).sort()).toEqual(['get', 'unknown']);

    m.setKnownCommands(['get', 'set', 'bogus']);
    m.commandCounter('bogus').inc();
    expect(await valueOf(m, 'commands_total', { command: 'bogus' })).toBe(1);
  });

  it('without knownCommands, well-formed names are accepted up to the cap', async () => {
    const m = new Metrics({ defaultMetrics: false, maxCommandLabels: 3 });
    expect(m.commandLabel('get')).toBe('get');
    expect(m.commandLabel('client|setname')).toBe('client|setname');
    expect(m.commandLabel('Not Lower')).toBe('unknown');
    expect(m.commandLabel('a\r\nb')).toBe('unknown');
    expect(m.commandLabel('set')).toBe('set');
    expect(m.commandLabel('mget')).toBe('unknown'); // cap reached
    expect(m.commandLabel('get')).toBe('get'); // already seen names keep their label
  });

  it('children are cached: same object for the same name, unknown names share one', () => {
    const m = new Metrics({ defaultMetrics: false, knownCommands: ['get'] });
    expect(m.commandCounter('get')).toBe(m.commandCounter('get'));
    expect(m.commandCounter('foo')).toBe(m.commandCounter('bar'));
    expect(m.commandErrorCounter('get', 'timeout')).toBe(m.commandErrorCounter('get', 'timeout'));
    expect(m.commandErrorCounter('foo', 'proxy')).toBe(m.commandErrorCounter('bar', 'proxy'));
    expect(m.latencyHistogram('n1')).toBe(m.latencyHistogram('n1'));
    expect(m.inflightGauge('n1')).toBe(m.inflightGauge('n1'));
    expect(m.upstreamLinksGauge('n1', 'resp3', 'replica')).toBe(m.upstreamLinksGauge('n1', 'resp3', 'replica'));
    expect(m.linkConnectCounter('n1', 'failed')).toBe(m.linkConnectCounter('n1', 'failed'));
    expect(m.retryCounter('clusterdown')).toBe(m.retryCounter('clusterdown'));
  });

  it('command errors are counted per command and kind', async () => {
    const m = new Metrics({ defaultMetrics: false, knownCommands: ['get'] });
    m.commandErrorCounter('get', 'server').inc();
    m.commandErrorCounter('get', 'redirect_limit').inc(2);
    m.commandErrorCounter('zzz', 'protocol').inc();
    expect(await valueOf(m, 'command_errors_total', { command: 'get', kind: 'server' })).toBe(1);
    expect(await valueOf(m, 'command_errors_total', { command: 'get', kind: 'redirect_limit' })).toBe(2);
    expect(await valueOf(m, 'command_errors_total', { command: 'unknown', kind: 'protocol' })).toBe(1);
  });
});

describe('node series', () => {
  it('forgetNode drops only that node’s series', async () => {
    const m = new Metrics({ defaultMetrics: false });
    for (const node of ['a:1', 'b:2']) {
      m.latencyHistogram(node).observe(0.001);
      m.inflightGauge(node).inc();
      m.upstreamLinksGauge(node, 'resp2', 'primary').inc(2);
      m.linkConnectCounter(node, 'ok').inc();
    }
    m.forgetNode('a:1');
    const text = await m.render();
    expect(text).not.toContain('node="a:1"');
    expect(text).toContain('respool_upstream_inflight_requests{node="b:2"} 1');
    expect(text).toContain('respool_upstream_links{node="b:2",protocol="resp2",role="primary"} 2');
    expect(text).toContain('respool_upstream_link_connects_total{node="b:2",outcome="ok"} 1');
    expect(text).toContain('respool_upstream_latency_seconds_count{node="b:2"} 1');
    // a node that comes back starts fresh
    m.inflightGauge('a:1').inc();
    expect(await valueOf(m, 'upstream_inflight_requests', { node: 'a:1' })).toBe(1);
  });
});

describe('fixed vocabularies', () => {
  it('are exported at 0 from the start and count independently', async () => {
    const m = new Metrics({ defaultMetrics: false });
    expect(await valueOf(m, 'redirects_total', { type: 'moved' })).toBe(0);
    expect(await valueOf(m, 'client_connections_rejected_total', { reason: 'draining' })).toBe(0);
    expect(await valueOf(m, 'topology_refreshes_total', { trigger: 'moved', outcome: 'skipped' })).toBe(0);
    m.redirectCounter('ask').inc();
    m.topologyRefreshCounter('moved', 'skipped').inc();
    m.connectionRejectedCounter('draining').inc();
    expect(await valueOf(m, 'redirects_total', { type: 'ask' })).toBe(1);
    expect(await valueOf(m, 'redirects_total', { type: 'moved' })).toBe(0);
    expect(await valueOf(m, 'topology_refreshes_total', { trigger: 'moved', outcome: 'skipped' })).toBe(1);
    expect(await valueOf(m, 'client_connections_rejected_total', { reason: 'draining' })).toBe(1);
  });
});
