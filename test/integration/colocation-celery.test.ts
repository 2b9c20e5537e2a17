/**
 * Celery (Debian's python3-celery 5.2 with kombu's Redis transport, default settings, no
 * global_keyprefix) through respool in front of a 3+3 cluster, as broker and result backend:
 * tasks, failures, scheduled tasks, chains and chords. Celery's keys (its queue lists,
 * `_kombu.binding.*`, `unacked*`, `celery-task-meta-*`, a chord's counter) sit in many slots; it
 * takes no WATCH, so respool's split transactions and multi-key BRPOP carry it without a rule, and
 * under a rule for every key the nodes hold it all in one slot.
 *
 * In front of Valkey 8.0.1 the result consumer's UNSUBSCRIBE (sent while it holds no channel) is
 * refused with NOSUB — by the server itself too (valkey-io/valkey#1228, reverted in #1265) — and
 * respool answers as its nodes would: a scenario may fail there with that error, as against one
 * valkey-server 8.0.1, and every one passes in front of Redis 7, whose UNSUBSCRIBE confirms.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import calculateSlot from 'cluster-key-slot';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCluster, startStandalone, type ServerKind, type ValkeyCluster, type ValkeyNode } from '../harness/valkey-processes.js';
import type { RespoolProxy } from '../../src/server.js';
import { startTestProxy } from '../helpers/proxy.js';

const run = promisify(execFile);

type Outcomes = Record<string, Record<string, unknown>>;

async function scenarios(port: number): Promise<Outcomes> {
  const { stdout } = await run('/usr/bin/python3', ['test/clients/celery-scenarios.py', '127.0.0.1', String(port)], { timeout: 150_000 });
  const out: Outcomes = {};
  for (const line of stdout.split('\n').filter((l) => l.startsWith('{"scenario"'))) {
    const parsed = JSON.parse(line) as Record<string, unknown>;
    out[parsed.scenario as string] = parsed;
  }
  return out;
}

const PASSED: Outcomes = {
  jobs: { scenario: 'jobs', ok: 200 },
  failed: { scenario: 'failed', state: 'FAILURE', raised: true },
  scheduled: { scenario: 'scheduled', values: [3, 7] },
  dependent: { scenario: 'dependent', chain: 20, chord: 20 },
};
const NOSUB = "ResponseError: NOSUB 'unsubscribe' command executed not in subscribed mode";

for (const server of ['redis', 'valkey'] as ServerKind[]) {
  describe(`Celery in front of a 3+3 ${server} cluster`, () => {
    let cluster: ValkeyCluster;
    let oracle: ValkeyNode;
    let plain: RespoolProxy;
    let colocated: RespoolProxy;

    beforeAll(async () => {
      [cluster, oracle] = await Promise.all([startCluster({ server, primaries: 3, replicasPerPrimary: 1 }), startStandalone({ server })]);
      const seed = [{ host: cluster.nodes[0]!.host, port: cluster.nodes[0]!.port }];
      plain = await startTestProxy(seed);
      colocated = await startTestProxy(seed, { colocate: [{ keys: '*', tag: 'celery' }] });
    }, 60_000);

    afterAll(async () => {
      await plain?.close();
      await colocated?.close();
      await Promise.all([cluster?.stop(), oracle?.stop()]);
    });

    /** Each scenario as Celery's own run against one server of the same kind ends it. */
    const expectAsOneServer = (got: Outcomes, alone: Outcomes) => {
      if (server === 'redis') {
        expect(alone).toEqual(PASSED);
        expect(got).toEqual(PASSED);
        return;
      }
      for (const name of Object.keys(PASSED)) {
        // Valkey 8.0.1 refuses the UNSUBSCRIBE when the consumer holds nothing; whether it does
        // depends on timing, on one server as through respool: either outcome, nothing else.
        for (const outcome of [alone[name], got[name]]) {
          if (outcome?.error === undefined) expect(outcome).toEqual(PASSED[name]);
          else expect(outcome).toEqual({ scenario: name, error: NOSUB });
        }
      }
    };

    it('without a rule: as on one server (no WATCH: split transactions and multi-key BRPOP carry it)', async () => {
      expectAsOneServer(await scenarios(plain.address.port), await scenarios(oracle.port));
    }, 180_000);

    it('with every key colocated: as on one server, every Celery key in one slot on the nodes', async () => {
      await Promise.all((await cluster.primaries()).map((n) => n.call('FLUSHALL')));
      expectAsOneServer(await scenarios(colocated.address.port), await scenarios(oracle.port));
      const primary = await cluster.primaryForSlot(calculateSlot('celery'));
      const stored = ((await primary.call('KEYS', '*')) as unknown as Buffer[]).map(String);
      expect(stored.some((k) => k.startsWith('{celery}celery-task-meta-'))).toBe(true);
      expect(stored.every((k) => k.startsWith('{celery}'))).toBe(true);
    }, 180_000);
  });
}
