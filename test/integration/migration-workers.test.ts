/**
 * Live migration with `--workers 3` (src/migration/migration-members.ts): worker 0 runs the
 * migration, every worker carries its own clients' writes (each copy confirmed against the source,
 * key-copier.ts), and the cutover holds, drains and switches every worker. Spawned from the
 * compiled bin, writers spread over the workers by the supervisor's round-robin.
 *
 *   - standalone → cluster under 4 verified writers on different workers: START and CUTOVER sent
 *     to workers other than the coordinator, synced, the source killed, writers go on, every key
 *     as its writer was told; STATUS counts every worker's carried writes
 *   - a member killed during the copy: its replacement joins the carry; after the cutover a member
 *     killed again: its replacement serves from the target (the source is gone)
 *   - worker 0 killed during the copy: its replacement resumes from the state file; writes made
 *     through the others meanwhile reach the target
 *   - a rollback window: writes through every worker after the cutover are carried back to the
 *     source, and ABORT switches every worker back to it
 *   - the supervisor's admin port: GET /migration and POST /migration/abort reach worker 0
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Valkey } from 'iovalkey';
import { afterEach, describe, expect, it } from 'vitest';
import { freePort, startCluster, startStandalone, type ValkeyNode } from '../harness/valkey-processes.js';
import { RESPOOL_BIN as BIN } from '../helpers/respool-cli.js';
import { differences, migrate, migrateStatus, ModelWriter, readKeys, seedKeyspace, waitForState, writersGoOnThenStop } from '../helpers/migration.js';
import { sleep, until, waitFor } from '../helpers/wait.js';

const TOKEN = 'migration-workers-token-0123456789';

interface Workers {
  child: ChildProcess;
  port: number;
  adminPort: number;
  /** Worker pids in worker order (index 0: the coordinator), from the supervisor's /readyz. */
  pids(): Promise<number[]>;
  output(): string;
}

const stops: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const stop of stops.splice(0).reverse()) await stop().catch(() => undefined);
});

/** `--workers 3` in front of `upstream`, its migration paced at `keysPerSecond`; resolves once every worker is ready. */
async function startWorkers(upstream: { host: string; port: number }, keysPerSecond: number, env: Record<string, string> = {}): Promise<Workers> {
  const port = await freePort();
  const adminPort = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'respool-mig-workers-'));
  let out = '';
  const child = spawn('node', [BIN, '--workers', '3', '--listen', `127.0.0.1:${port}`, '--admin', `127.0.0.1:${adminPort}`, '--upstream', `${upstream.host}:${upstream.port}`, '--log-level', 'info'], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, RESPOOL_ADMIN_TOKEN: TOKEN, RESPOOL_MIGRATION_MAX_KEYS_PER_SECOND: String(keysPerSecond), RESPOOL_MIGRATION_PACE_BY_LATENCY: 'false', RESPOOL_MIGRATION_STATE_FILE: join(dir, 'state.json'), ...env },
  });
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  stops.push(async () => {
    if (child.exitCode === null) {
      child.kill('SIGKILL');
      await new Promise((resolve) => child.once('exit', resolve));
    }
    rmSync(dir, { recursive: true, force: true });
  });
  const pids = async () => {
    const res = await fetch(`http://127.0.0.1:${adminPort}/readyz`, { signal: AbortSignal.timeout(5_000) });
    if (res.status !== 200) return [];
    return ((await res.json()) as { workers: number[] }).workers;
  };
  await until('three workers ready', async () => ((await pids().catch(() => [])).length === 3 ? true : undefined), 30_000);
  return { child, port, adminPort, pids, output: () => out };
}

const clients: Valkey[] = [];
afterEach(() => {
  for (const c of clients.splice(0)) c.disconnect();
});

/** A client of the proxy; resolves once connected. */
async function connect(port: number): Promise<Valkey> {
  const c = new Valkey({ host: '127.0.0.1', port, maxRetriesPerRequest: 0 });
  c.on('error', () => undefined);
  clients.push(c);
  await c.ping();
  return c;
}

/** process_id of the worker serving `c`. */
async function workerOf(c: Valkey): Promise<number> {
  return Number(/process_id:(\d+)/.exec(String(await c.info('server')))![1]);
}

/** Clients of the proxy until there is one on each worker: pid → client. */
async function oneClientPerWorker(port: number, pids: number[]): Promise<Map<number, Valkey>> {
  const byPid = new Map<number, Valkey>();
  for (let i = 0; i < 30 && byPid.size < pids.length; i++) {
    const c = await connect(port);
    const pid = await workerOf(c);
    if (!byPid.has(pid)) byPid.set(pid, c);
  }
  expect([...byPid.keys()].sort()).toEqual([...pids].sort());
  return byPid;
}

async function keep<T extends { stop(): Promise<void> }>(starting: Promise<T>): Promise<T> {
  const thing = await starting;
  stops.push(() => thing.stop());
  return thing;
}

const at = (n: ValkeyNode) => ({ host: n.host, port: n.port });

describe('live migration with workers: every worker carries its writes, one coordinates', () => {
  it('standalone → cluster under 4 writers on different workers; START and CUTOVER sent to other workers; the source killed after', async () => {
    const [source, target] = await Promise.all([keep(startStandalone()), keep(startCluster({ primaries: 3, replicasPerPrimary: 0 }))]);
    const proxy = await startWorkers(at(source), 2_000);
    const pids = await proxy.pids();
    const byPid = await oneClientPerWorker(proxy.port, pids);
    const coordinator = byPid.get(pids[0]!)!;
    const member = byPid.get(pids[1]!)!;
    const other = byPid.get(pids[2]!)!;
    const seeded = await seedKeyspace(coordinator, 'seed:');
    const seedAt = Date.now();
    const seedValues = await readKeys(coordinator, seeded);

    // Writers until each of the three workers serves at least one.
    const writerClients: Valkey[] = [];
    const writerPids = new Set<number>();
    while (writerClients.length < 4 || writerPids.size < 3) {
      const c = await connect(proxy.port);
      const pid = await workerOf(c);
      if (writerClients.length >= 4 && writerPids.has(pid)) continue;
      writerClients.push(c);
      writerPids.add(pid);
    }
    const writers = writerClients.map((c, i) => new ModelWriter(c, i));
    for (const w of writers) w.start();
    const ops = () => writers.reduce((n, w) => n + w.ops, 0);
    try {
      await waitFor(() => ops() > 500, 'the writers to get going', 10_000);
      // START on a member: the coordinator runs it.
      expect(await migrate(member, 'START', `${target.nodes[0]!.host}:${target.nodes[0]!.port}`)).toBe('OK');
      const during = await migrateStatus(other);
      expect(['copying', 'verifying', 'synced']).toContain(during['state']);
      const synced = await waitForState(other, 'synced', 60_000, ['aborted', 'paused']);
      expect(synced['reason']).toBe(null);
      expect(Number(synced['copied'])).toBeGreaterThanOrEqual(seeded.length);
      await sleep(1_200); // the members' counts come every second
      const counted = await migrateStatus(member);
      // Every worker's writes are counted: more than the coordinator's own clients could have made.
      expect(Number(counted['writes_seen'])).toBeGreaterThan(0);
      expect(Number(counted['mirrored'])).toBeGreaterThan(0);
      expect.soft(counted['mismatched'], 'mismatched at synced').toBe(0);
      const verify = (await migrate(other, 'VERIFY')) as unknown[];
      expect.soft(verify.slice(2), 'VERIFY').toEqual(['mismatched', 0]);

      // CUTOVER on the third worker.
      const cut = await migrate(other, 'CUTOVER');
      expect(cut, `CUTOVER replied ${JSON.stringify(cut)}\n${proxy.output().slice(-3000)}`).toEqual(expect.stringMatching(/^cut over: writes held [\d.]+ ms$/));
      expect((await migrateStatus(member))['state']).toBe('cut-over');

      await source.stop();
    } catch (err) {
      await Promise.all(writers.map((w) => w.stop()));
      throw err;
    }
    const { expected, at: now } = await writersGoOnThenStop(writers);
    // Read through every worker: each reads the target now.
    for (const c of [coordinator, member, other]) {
      const actual = await readKeys(c, [...expected.keys()]);
      expect(differences(expected, now, actual, Date.now())).toEqual([]);
    }
    expect(differences(seedValues, seedAt, await readKeys(member, seeded), Date.now())).toEqual([]);
  }, 120_000);

  it('a member killed during the copy is replaced and its replacement carries; one killed after the cutover serves from the target', async () => {
    const [source, target] = await Promise.all([keep(startStandalone()), keep(startStandalone())]);
    const proxy = await startWorkers(at(source), 500);
    const pids = await proxy.pids();
    const admin = await connect(proxy.port);
    await seedKeyspace(admin, 'seed:', { strings: 1500, hashes: 100, lists: 100, sets: 100, zsets: 100, streams: 2, withTtl: 100 });
    expect(await migrate(admin, 'START', `${target.host}:${target.port}`)).toBe('OK');
    await sleep(300);
    expect((await migrateStatus(admin))['state']).toBe('copying');

    // Worker 1 killed mid-copy; the supervisor replaces it.
    process.kill(pids[1]!, 'SIGKILL');
    const replaced = await until('worker 1 replaced', async () => {
      const now = await proxy.pids().catch(() => []);
      return now.length === 3 && now[1] !== pids[1] ? now : undefined;
    }, 30_000);
    // A client on the replacement writes: its writes reach the target.
    const onReplacement = (await oneClientPerWorker(proxy.port, replaced)).get(replaced[1]!)!;
    for (let i = 0; i < 200; i++) await onReplacement.set(`late:${i}`, `v${i}`);
    await waitForState(admin, 'synced', 60_000, ['aborted', 'paused']);
    const direct = new Valkey({ host: target.host, port: target.port, maxRetriesPerRequest: 0 });
    clients.push(direct);
    expect(await direct.get('late:199')).toBe('v199');
    for (let i = 0; i < 200; i += 37) expect(await direct.get(`late:${i}`)).toBe(`v${i}`);

    expect(await migrate(admin, 'CUTOVER')).toEqual(expect.stringMatching(/^cut over/));
    await source.stop();
    // Worker 2 killed after the cutover: its replacement must serve from the target, not the gone source.
    process.kill(replaced[2]!, 'SIGKILL');
    const again = await until('worker 2 replaced', async () => {
      const now = await proxy.pids().catch(() => []);
      return now.length === 3 && now[2] !== replaced[2] ? now : undefined;
    }, 30_000);
    const onNew = (await oneClientPerWorker(proxy.port, again)).get(again[2]!)!;
    expect(await onNew.get('late:5')).toBe('v5');
    expect(await onNew.set('after', 'cutover')).toBe('OK');
    expect(await direct.get('after')).toBe('cutover');
  }, 120_000);

  it('worker 0 killed mid-copy: its replacement resumes the migration from the state file, the others carry meanwhile', async () => {
    const [source, target] = await Promise.all([keep(startStandalone()), keep(startStandalone())]);
    const proxy = await startWorkers(at(source), 500);
    const pids = await proxy.pids();
    // A client on each worker, connected before the kill (a connection dealt to a worker as it dies would wait).
    const byPid = await oneClientPerWorker(proxy.port, pids);
    const admin = byPid.get(pids[1]!)!;
    await seedKeyspace(admin, 'seed:', { strings: 1500, hashes: 50, lists: 50, sets: 50, zsets: 50, streams: 1, withTtl: 50 });
    expect(await migrate(admin, 'START', `${target.host}:${target.port}`)).toBe('OK');
    await sleep(1_500); // a saved state on disk (every second)
    process.kill(pids[0]!, 'SIGKILL');
    // Writes through the other workers while worker 0 is down: they carry them themselves.
    for (const pid of [pids[1]!, pids[2]!]) for (let i = 0; i < 100; i++) await byPid.get(pid)!.set(`while-down:${pid}:${i}`, `v${i}`);
    const replaced = await until('worker 0 replaced', async () => {
      const now = await proxy.pids().catch(() => []);
      return now.length === 3 && now[0] !== pids[0] ? now : undefined;
    }, 30_000);
    const onNew = (await oneClientPerWorker(proxy.port, replaced)).get(replaced[0]!)!;
    const resumed = await waitForState(onNew, 'synced', 60_000, ['aborted', 'paused']);
    expect(resumed['resumed']).toBe('true');
    const direct = new Valkey({ host: target.host, port: target.port, maxRetriesPerRequest: 0 });
    clients.push(direct);
    for (const pid of [pids[1]!, pids[2]!]) expect(await direct.get(`while-down:${pid}:99`)).toBe('v99');
    expect(Number(await direct.dbsize())).toBe(Number(await onNew.dbsize()));
    expect(await migrate(admin, 'CUTOVER')).toEqual(expect.stringMatching(/^cut over/));
  }, 120_000);

  it('a rollback window: every worker carries its writes back to the source after the cutover, and ABORT switches every worker back', async () => {
    const [source, target] = await Promise.all([keep(startStandalone()), keep(startStandalone())]);
    const proxy = await startWorkers(at(source), 2_000, { RESPOOL_MIGRATION_ROLLBACK_WINDOW_MS: '60s' });
    const pids = await proxy.pids();
    const byPid = await oneClientPerWorker(proxy.port, pids);
    const admin = byPid.get(pids[2]!)!;
    await seedKeyspace(admin, 'seed:', { strings: 500, hashes: 10, lists: 10, sets: 10, zsets: 10, streams: 1, withTtl: 10 });
    expect(await migrate(admin, 'START', `${target.host}:${target.port}`)).toBe('OK');
    await waitForState(admin, 'synced', 60_000, ['aborted', 'paused']);
    expect(await migrate(admin, 'CUTOVER')).toEqual(expect.stringMatching(/^cut over/));
    // Writes through every worker after the cutover go to the target and are carried back.
    for (const [pid, c] of byPid) for (let i = 0; i < 50; i++) await c.set(`after:${pid}:${i}`, `t${i}`);
    const onSource = new Valkey({ host: source.host, port: source.port, maxRetriesPerRequest: 0 });
    const onTarget = new Valkey({ host: target.host, port: target.port, maxRetriesPerRequest: 0 });
    clients.push(onSource, onTarget);
    for (const pid of byPid.keys()) {
      expect(await onTarget.get(`after:${pid}:49`)).toBe('t49');
      await waitFor(async () => (await onSource.get(`after:${pid}:49`)) === 't49', `worker ${pid}'s writes carried back to the source`, 5_000);
    }
    expect(await migrate(admin, 'ABORT')).toBe('rolled back: the upstreams are the source again');
    // Every worker reads and writes the source again.
    for (const [pid, c] of byPid) {
      expect(await c.set(`back:${pid}`, 'source')).toBe('OK');
      expect(await onSource.get(`back:${pid}`)).toBe('source');
      expect(await onTarget.exists(`back:${pid}`)).toBe(0);
    }
  }, 120_000);

  it('the supervisor\'s admin port: GET /migration and POST /migration/abort reach worker 0; the target is emptied', async () => {
    const [source, target] = await Promise.all([keep(startStandalone()), keep(startStandalone())]);
    const proxy = await startWorkers(at(source), 300);
    const admin = await connect(proxy.port);
    await seedKeyspace(admin, 'seed:', { strings: 1000, hashes: 10, lists: 10, sets: 10, zsets: 10, streams: 1, withTtl: 10 });
    const before = Number(await admin.dbsize());
    const post = (path: string, body: unknown) => fetch(`http://127.0.0.1:${proxy.adminPort}${path}`, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
    const started = await post('/migration/start', { target: `${target.host}:${target.port}` });
    expect(started.status, await started.clone().text()).toBe(200);
    // A second START through the supervisor is refused by the same coordinator.
    expect((await post('/migration/start', { target: `${target.host}:${target.port}` })).status).toBe(409);
    const status = (await (await fetch(`http://127.0.0.1:${proxy.adminPort}/migration`)).json()) as Record<string, unknown>;
    expect(status['state']).toBe('copying');
    // Writes on every worker while copying.
    for (let i = 0; i < 60; i++) await (await connect(proxy.port)).set(`during:${i}`, 'x');
    const aborted = await post('/migration/abort', {});
    expect(aborted.status, await aborted.clone().text()).toBe(200);
    expect(await aborted.json()).toEqual({ flushed: true, rolledBack: false });
    const direct = new Valkey({ host: target.host, port: target.port, maxRetriesPerRequest: 0 });
    clients.push(direct);
    await sleep(300);
    expect(await direct.dbsize()).toBe(0); // nothing restored after the flush, by any worker
    expect(Number(await admin.dbsize())).toBe(before + 60);
  }, 90_000);
});
