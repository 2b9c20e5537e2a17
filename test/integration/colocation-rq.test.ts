/**
 * RQ (Debian's python3-rq, default settings) through respool in front of a 3+3 cluster. Its job
 * completion WATCHes a job's key and then writes the queue's, worker's and registries' keys, which
 * sit in several slots: refused (CROSSSLOT) without colocation, run on one node with Valkey's own
 * guarantees under the rule `rq:* → {rq}`. The nodes then hold every RQ key as `{rq}rq:…`, and RQ
 * still sees its own names (BLPOP's queue key, which it parses, included).
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import calculateSlot from 'cluster-key-slot';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCluster, type ValkeyCluster } from '../harness/valkey-processes.js';
import type { RespoolProxy } from '../../src/server.js';
import { startTestProxy } from '../helpers/proxy.js';

const run = promisify(execFile);

async function scenarios(proxy: RespoolProxy, queue: string): Promise<Record<string, Record<string, unknown>>> {
  const { stdout } = await run('/usr/bin/python3', ['test/clients/rq-scenarios.py', '127.0.0.1', String(proxy.address.port), queue], { timeout: 120_000 });
  const out: Record<string, Record<string, unknown>> = {};
  for (const line of stdout.split('\n').filter((l) => l.startsWith('{"scenario"'))) {
    const parsed = JSON.parse(line) as Record<string, unknown>;
    out[parsed.scenario as string] = parsed;
  }
  return out;
}

describe('RQ in front of a 3+3 cluster', () => {
  let cluster: ValkeyCluster;
  let plain: RespoolProxy;
  let colocated: RespoolProxy;

  beforeAll(async () => {
    cluster = await startCluster({ primaries: 3, replicasPerPrimary: 1 });
    const seed = [{ host: cluster.nodes[0]!.host, port: cluster.nodes[0]!.port }];
    plain = await startTestProxy(seed);
    colocated = await startTestProxy(seed, { colocate: [{ keys: 'rq:*', tag: 'rq' }] });
  }, 60_000);

  afterAll(async () => {
    await plain?.close();
    await colocated?.close();
    await cluster?.stop();
  });

  it('without a rule, job completion is refused: CROSSSLOT for WATCH over keys in several slots', async () => {
    const out = await scenarios(plain, 'plain');
    expect(out.jobs!.ok).toBeLessThan(200);
  }, 150_000);

  it('with rq:* colocated: jobs, failures, scheduled jobs and dependencies run as on one server', async () => {
    const out = await scenarios(colocated, 'default');
    expect(out.jobs).toEqual({ scenario: 'jobs', ok: 200, finished: 200, left: 0 });
    expect(out.failed).toEqual({ scenario: 'failed', in_registry: true, status: 'failed', raised: true });
    expect(out.scheduled).toEqual({ scenario: 'scheduled', statuses: ['finished', 'finished'], values: ['at', 'in'] });
    expect(out.dependent).toEqual({ scenario: 'dependent', deferred: 'deferred', results: [21, 2] });
    // On the nodes every RQ key is stored under the tag, in one slot; none under the client's name.
    const primary = await cluster.primaryForSlot(calculateSlot('rq'));
    const stored = ((await primary.call('KEYS', '*')) as unknown as Buffer[]).map(String);
    expect(stored).toContain('{rq}rq:failed:default');
    expect(stored.some((k) => k.startsWith('{rq}rq:job:'))).toBe(true);
    for (const node of cluster.nodes) expect(((await node.call('KEYS', 'rq:*default')) as unknown as Buffer[]).map(String)).toEqual([]);
  }, 150_000);
});
