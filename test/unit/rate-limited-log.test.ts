import { Writable } from 'node:stream';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { RateLimitedLog } from '../../src/util/rate-limited-log.js';
import { CircuitBreaker } from '../../src/upstream/circuit-breaker.js';
import { NodeHealth } from '../../src/upstream/node-health.js';
import { DEFAULT_CONFIG } from '../../src/config/defaults.js';
import { diffTopology } from '../../src/cluster/topology-diff.js';
import { Topology } from '../../src/cluster/topology.js';
import { createLogger } from '../../src/util/logger.js';

function capture() {
  const lines: Array<Record<string, unknown>> = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const l of chunk.toString().split('\n')) if (l.trim() !== '') lines.push(JSON.parse(l) as Record<string, unknown>);
      done();
    },
  });
  return { lines, log: pino({ level: 'debug' }, stream) };
}
const flush = () => new Promise((r) => setImmediate(r));

describe('RateLimitedLog', () => {
  it('writes at most one line per interval per kind+key, then reports how many it suppressed', async () => {
    let now = 1000;
    const { lines, log } = capture();
    const events = new RateLimitedLog(log, 1000, () => now);
    expect(events.emit('warn', 'node_lost', 'a:1', { node: 'a:1' }, 'lost')).toBe(true);
    for (let i = 0; i < 50; i++) expect(events.emit('warn', 'node_lost', 'a:1', { node: 'a:1' }, 'lost')).toBe(false);
    // another key, another kind: independent
    expect(events.emit('warn', 'node_lost', 'b:2', { node: 'b:2' }, 'lost')).toBe(true);
    expect(events.emit('warn', 'circuit_open', 'a:1', { node: 'a:1' }, 'open')).toBe(true);
    now += 999;
    expect(events.emit('warn', 'node_lost', 'a:1', {}, 'lost')).toBe(false);
    now += 1;
    expect(events.emit('warn', 'node_lost', 'a:1', { node: 'a:1' }, 'lost')).toBe(true);
    now += 1000;
    expect(events.emit('info', 'node_lost', 'a:1', { node: 'a:1' }, 'lost')).toBe(true);
    await flush();
    expect(lines.map((l) => [l['event'], l['node'], l['suppressed']])).toEqual([
      ['node_lost', 'a:1', undefined],
      ['node_lost', 'b:2', undefined],
      ['circuit_open', 'a:1', undefined],
      ['node_lost', 'a:1', 51],
      ['node_lost', 'a:1', undefined],
    ]);
    expect(lines[0]!['msg']).toBe('lost');
    expect(lines[0]!['level']).toBe(40);
  });

  it('a circuit reports node lost, circuit open, closed and node back, once each', async () => {
    const { lines, log } = capture();
    const health = new NodeHealth('10.0.0.1:7000', { ...DEFAULT_CONFIG.resilience, circuitFailureThreshold: 3 }, undefined, new RateLimitedLog(log));
    const c: CircuitBreaker = health.circuit;
    c.onLinkLost('connection reset');
    for (let i = 0; i < 3; i++) c.onDialFailure('ECONNREFUSED', Date.now());
    // a failed probe (half-open → open again) is not logged as a new opening
    expect(c.tryAcquireDial(Date.now() + 60_000)).toBe(true);
    expect(c.state).toBe('half-open');
    c.onDialFailure('ECONNREFUSED', Date.now() + 60_000);
    expect(c.state).toBe('open');
    c.onDialSuccess();
    health.onShed('node_down', 'no link');
    await flush();
    expect(lines.map((l) => l['event'])).toEqual(['node_lost', 'circuit_open', 'circuit_closed', 'node_back', 'load_shed']);
    expect(lines[0]).toMatchObject({ node: '10.0.0.1:7000', error: 'connection reset' });
    expect(lines[1]).toMatchObject({ node: '10.0.0.1:7000', failures: 3, error: 'ECONNREFUSED' });
    expect(typeof lines[2]!['openForMs']).toBe('number');
    expect(typeof lines[3]!['downForMs']).toBe('number');
  });

  it('describes a topology change: slots moved, nodes added/removed, role changes', () => {
    const n = (port: number, role: 'primary' | 'replica') => ({
      id: String(port), host: '127.0.0.1', port, address: `127.0.0.1:${port}`, role, health: 'online', zone: null, replicationOffset: 0,
    });
    const before = new Topology('cluster', [
      { primary: n(1, 'primary'), replicas: [n(2, 'replica')], slots: [[0, 8191]] },
      { primary: n(3, 'primary'), replicas: [], slots: [[8192, 16383]] },
    ], 'x');
    const after = new Topology('cluster', [
      { primary: n(2, 'primary'), replicas: [], slots: [[0, 8191]] },
      { primary: n(3, 'primary'), replicas: [n(4, 'replica')], slots: [[8192, 16383]] },
    ], 'x');
    const d = diffTopology(before, after);
    expect(d).toMatchObject({ changed: true, slotsMoved: 8192, movedTo: { '127.0.0.1:2': 8192 }, nodesAdded: ['127.0.0.1:4'], nodesRemoved: ['127.0.0.1:1'], roleChanges: ['127.0.0.1:2→primary'] });
    expect(diffTopology(after, after).changed).toBe(false);
  });

  it('a reload of the log level reaches child loggers (pino copies the level only at creation)', async () => {
    const out: string[] = [];
    const log = createLogger('info', { destination: new Writable({ write(c: Buffer, _e, d) { out.push(c.toString()); d(); } }) });
    const child = log.child({ component: 'pubsub' });
    const grandchild = child.child({ channel: 'x' });
    child.debug('hidden');
    log.level = 'debug';
    child.debug('shown');
    grandchild.debug('shown too');
    log.level = 'warn';
    expect([child.level, grandchild.level]).toEqual(['warn', 'warn']);
    await flush();
    expect(out.map((l) => (JSON.parse(l) as { msg: string }).msg)).toEqual(['shown', 'shown too']);
  });
});
