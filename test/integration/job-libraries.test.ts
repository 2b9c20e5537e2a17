/**
 * The job-queue libraries' patterns of issue 19, played end to end through respool in front of a
 * 3+3 cluster by many clients at once (iovalkey, a plain non-cluster client, as those libraries
 * use one server), with the data checked after: priority queues drained by workers blocked over
 * several slots and sized in transactions, jobs enqueued in transactions over several slots,
 * worker heartbeats and counters, and grouped-task bookkeeping whose last task must fire once.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import calculateSlot from 'cluster-key-slot';
import type { Valkey } from 'iovalkey';
import { startCluster, type ValkeyCluster } from '../harness/valkey-processes.js';
import type { RespoolProxy } from '../../src/server.js';
import { clientFor, startTestProxy } from '../helpers/proxy.js';
import { seededRandom } from '../helpers/test-data.js';

const QUEUES = ['q', 'q\x06\x163', 'q\x06\x166', 'q\x06\x169'];

/** EXEC's results, failing on any error inside (iovalkey gives [error, value] pairs). */
function values(result: Array<[Error | null, unknown]> | null): unknown[] {
  expect(result).not.toBeNull();
  for (const [err] of result!) expect(err).toBeNull();
  return result!.map(([, v]) => v);
}

describe('job libraries through respool in front of a 3+3 cluster', () => {
  let cluster: ValkeyCluster;
  let proxy: RespoolProxy;
  const clients: Valkey[] = [];
  const client = (): Valkey => {
    const c = clientFor(proxy);
    clients.push(c);
    return c;
  };

  beforeAll(async () => {
    cluster = await startCluster({ primaries: 3, replicasPerPrimary: 1 });
    const seed = cluster.nodes[0]!;
    proxy = await startTestProxy([{ host: seed.host, port: seed.port }]);
  });

  afterAll(async () => {
    for (const c of clients) c.disconnect();
    await proxy?.close();
    await cluster?.stop();
  });

  it('the keys of every pattern span primaries', async () => {
    const owners = async (keys: string[]) => new Set(await Promise.all(keys.map(async (k) => (await cluster.primaryForSlot(calculateSlot(k))).port)));
    expect((await owners(QUEUES)).size).toBeGreaterThan(1);
    expect((await owners(['queues', 'queue:default', 'queue:mail'])).size).toBeGreaterThan(1);
    expect(calculateSlot('stat:processed')).not.toBe(calculateSlot('stat:processed:2026-12-01'));
    expect((await owners(['stat:processed', 'stat:processed:2026-12-01', 'host:0:workers', 'host:0'])).size).toBeGreaterThan(1);
    expect((await owners(['meta.j0', 'meta.t0', 'meta.s0'])).size).toBeGreaterThan(1);
  });

  it('priority queues: 8 producers push 2,000 jobs, 12 workers BRPOP over the 4 queues, a monitor sizes them in MULTI; every job done once', async () => {
    const jobs = 2000;
    const rand = seededRandom(19);
    const producers = Array.from({ length: 8 }, () => client());
    const workers = Array.from({ length: 12 }, () => client());
    const monitor = client();
    const done: string[] = [];
    let produced = 0;
    let stop = false;
    const sizes: number[][] = [];
    const sizing = (async () => {
      while (!stop) {
        const tx = monitor.multi();
        for (const q of QUEUES) tx.llen(q);
        const lengths = values(await tx.exec()) as number[];
        expect(lengths.every((n) => n >= 0)).toBe(true);
        sizes.push(lengths);
        await new Promise((r) => setTimeout(r, 5));
      }
    })();
    const working = workers.map(async (w) => {
      for (;;) {
        const got = await w.brpop(...QUEUES, 1);
        if (got === null) {
          if (produced === jobs) return;
          continue;
        }
        expect(QUEUES).toContain(got[0]);
        done.push(got[1]);
      }
    });
    await Promise.all(
      producers.map(async (p, i) => {
        for (let j = i; j < jobs; j += producers.length) {
          await p.lpush(QUEUES[Math.floor(rand() * QUEUES.length)]!, `job-${j}`);
          produced++;
        }
      }),
    );
    await Promise.all(working);
    stop = true;
    await sizing;
    expect(done.sort()).toEqual(Array.from({ length: jobs }, (_, j) => `job-${j}`).sort());
    const final = values(await QUEUES.reduce((tx, q) => tx.llen(q), monitor.multi()).exec());
    expect(final).toEqual([0, 0, 0, 0]);
    expect(sizes.length).toBeGreaterThan(0);
  });

  it('enqueueing jobs: 10 clients run MULTI SADD queues / HSET job / HSET job / RPUSH queue EXEC, 8 workers take them with BLPOP over two queues; every job finished once', async () => {
    const perClient = 60;
    const enqueuers = Array.from({ length: 10 }, () => client());
    const workers = Array.from({ length: 8 }, () => client());
    let enqueued = 0;
    const total = enqueuers.length * perClient;
    const taken = new Map<string, number>();
    const working = workers.map(async (w) => {
      for (;;) {
        const got = await w.blpop('queue:default', 'queue:mail', 1);
        if (got === null) {
          if (enqueued === total) return;
          continue;
        }
        const id = got[1];
        taken.set(id, (taken.get(id) ?? 0) + 1);
        const tx = w.multi().hset(`job:${id}`, 'status', 'finished', 'worker', 'w').incr('stat:finished');
        values(await tx.exec());
      }
    });
    await Promise.all(
      enqueuers.map(async (e, i) => {
        for (let j = 0; j < perClient; j++) {
          const id = `${i}-${j}`;
          const queue = j % 3 === 0 ? 'mail' : 'default';
          const tx = e
            .multi()
            .sadd('queues', queue)
            .hset(`job:${id}`, 'status', 'queued', 'origin', queue)
            .hset(`job:${id}`, 'data', JSON.stringify({ args: [i, j] }), 'enqueued_at', String(Date.now()))
            .rpush(`queue:${queue}`, id);
          const [added, created, more, length] = values(await tx.exec()) as number[];
          expect([0, 1]).toContain(added);
          expect(created).toBe(2);
          expect(more).toBe(2);
          expect(length).toBeGreaterThan(0);
          enqueued++;
        }
      }),
    );
    await Promise.all(working);
    expect(taken.size).toBe(total);
    expect([...taken.values()].every((n) => n === 1)).toBe(true);
    const check = client();
    expect((await check.smembers('queues')).sort()).toEqual(['default', 'mail']);
    expect(await check.get('stat:finished')).toBe(String(total));
    for (const id of taken.keys()) expect(await check.hget(`job:${id}`, 'status')).toBe('finished');
    expect(await check.exists('queue:default', 'queue:mail')).toBe(0);
  });

  it("workers' heartbeats: 16 workers × 50 beats of MULTI INCRBY / INCRBY / EXPIRE / UNLINK / EXPIRE EXEC; counters exact", async () => {
    const workers = Array.from({ length: 16 }, () => client());
    const beats = 50;
    await Promise.all(
      workers.map(async (w, i) => {
        for (let b = 0; b < beats; b++) {
          await w.sadd(`host:${i}:workers`, 'busy');
          await w.hset(`host:${i}`, 'beat', String(b));
          const tx = w
            .multi()
            .incrby('stat:processed', 3)
            .incrby('stat:processed:2026-12-01', 3)
            .expire('stat:processed:2026-12-01', 157_680_000)
            .unlink(`host:${i}:workers`)
            .expire(`host:${i}`, 60);
          const [processed, daily, expired, unlinked, beat] = values(await tx.exec()) as number[];
          expect(processed).toBeGreaterThan(0);
          expect(daily).toBeGreaterThan(0);
          expect([expired, unlinked, beat]).toEqual([1, 1, 1]);
        }
      }),
    );
    const check = client();
    expect(await check.get('stat:processed')).toBe(String(16 * beats * 3));
    expect(await check.get('stat:processed:2026-12-01')).toBe(String(16 * beats * 3));
    expect(await check.ttl('stat:processed:2026-12-01')).toBeGreaterThan(157_000_000);
    for (let i = 0; i < 16; i++) {
      expect(await check.exists(`host:${i}:workers`)).toBe(0);
      expect(await check.ttl(`host:${i}`)).toBeGreaterThan(0);
    }
  });

  it('grouped tasks: 20 groups of 25 tasks finished by 25 clients at once, each MULTI ZADD meta.j / ZCOUNT / GET meta.t / GET meta.s / EXPIRE EXEC; the last task of each group fires exactly once', async () => {
    const groups = 20;
    const tasks = 25;
    const setup = client();
    for (let g = 0; g < groups; g++) await setup.mset(`meta.t${g}`, String(tasks), `meta.s${g}`, 'SUCCESS');
    const runners = Array.from({ length: tasks }, () => client());
    const fired = new Map<number, number>();
    await Promise.all(
      runners.map(async (r, t) => {
        for (let g = 0; g < groups; g++) {
          const tx = r
            .multi()
            .zadd(`meta.j${g}`, t, `task-${t}`)
            .zcount(`meta.j${g}`, '-inf', '+inf')
            .get(`meta.t${g}`)
            .get(`meta.s${g}`)
            .expire(`meta.j${g}`, 86_400);
          const [, count, total, state] = values(await tx.exec()) as [number, number, string, string, number];
          expect(state).toBe('SUCCESS');
          if (count === Number(total)) fired.set(g, (fired.get(g) ?? 0) + 1);
        }
      }),
    );
    for (let g = 0; g < groups; g++) expect(fired.get(g), `group ${g}`).toBe(1);
    expect(await setup.zcard('meta.j0')).toBe(tasks);
  });
});
