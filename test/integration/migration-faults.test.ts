/**
 * Live migration (src/migration, RESPOOL MIGRATE) when things go wrong:
 *   - refusals at START, each leaving both sides as they were: an unreachable target, credentials
 *     the target refuses (then accepted with migration.upstreamAuth), a target that holds keys
 *     (then MERGE), a target that cannot RESTORE the source's DUMP format (Valkey 8 → Redis 7.0),
 *     a cluster target for a source with keys in database 2
 *   - ABORT mid-copy: the source exactly as it was (a DUMP of every key), the target empty again
 *   - respool restarted mid-copy with the same migration.stateFile: resumed, every key compared,
 *     synced with every key equal on both sides
 *   - respool restarted after the cutover with a config that still names the source: it serves
 *     from the target (the source still up, then gone); once the config names the target, the
 *     record of the move is removed
 *   - a target that stops answering mid-copy (a blackholing relay): paused with a reason, clients
 *     served meanwhile, and on by itself to synced once it answers again
 */
import { existsSync, readFileSync } from 'node:fs';
import { cutoverRecordPath } from '../../src/migration/cutover-record.js';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { freePort, startCluster, startStandalone, type ValkeyNode } from '../harness/valkey-processes.js';
import { clientFor, startTestProxy } from '../helpers/proxy.js';
import { FaultRelay } from '../helpers/fault-relay.js';
import { sleep, waitFor } from '../helpers/wait.js';
import { TestResources, differences, dumpAll, migrate, migrateStatus, ModelWriter, readKeys, scanKeys, seedKeyspace, waitForState, type SeedCounts } from '../helpers/migration.js';

const resources = new TestResources();
afterEach(resources.stopAll);
const { keep, keepStarted, proxyFor, client, direct } = resources;

const at = (n: { host: string; port: number }) => ({ host: n.host, port: n.port });
const SMALL: SeedCounts = { strings: 150, hashes: 30, lists: 30, sets: 30, zsets: 30, streams: 3, withTtl: 30 };
const MEDIUM: SeedCounts = { strings: 1500, hashes: 300, lists: 300, sets: 300, zsets: 300, streams: 6, withTtl: 300 };
const REFUSED = /^ERR respool: migration: /;

let stateFiles = 0;
const stateFileName = () => join(tmpdir(), `respool-migration-faults-${process.pid}-${++stateFiles}.json`);

/** Every key of a standalone source equal on a standalone target (values, expiries within 1 s), and no other key there. */
async function sameEverywhere(source: ValkeyNode, target: ValkeyNode): Promise<void> {
  const keys = await scanKeys(direct(source));
  expect(await scanKeys(direct(target))).toEqual(keys);
  const t = Date.now();
  const want = await readKeys(direct(source), keys);
  expect(differences(want, t, await readKeys(direct(target), keys), Date.now())).toEqual([]);
}

describe('migration refusals at START', () => {
  it('each refusal leaves both sides as they were; then the fixed START succeeds', async () => {
    const [source, locked, holding, redis7] = await Promise.all([
      startStandalone(), startStandalone({ password: 'target-secret-pw' }), startStandalone(), startStandalone({ server: 'redis' }),
    ]);
    [source, locked, holding, redis7].forEach(keep);
    const cluster = keep(await startCluster({ primaries: 3, replicasPerPrimary: 0 }));
    const stateFile = stateFileName();
    const proxy = await proxyFor([at(source)], { migration: { stateFile } } as never);
    const c = client(proxy);
    await seedKeyspace(c, 'r:', SMALL);
    const sourceBefore = await dumpAll(direct(source));
    await holding.call('SET', 'r:str:1', 'the target\'s own value');
    await holding.call('SET', 'theirs', 'kept');
    await holding.call('HSET', 'theirs:h', 'a', '1');
    const holdingBefore = await dumpAll(direct(holding));

    /** Refused with `message`; the source, every target, STATUS and the state file as they were. */
    const refused = async (args: string[], message: RegExp, on = c) => {
      const reply = (await migrate(on, 'START', ...args)) as { error?: string };
      expect(reply.error, `START ${args.join(' ')}`).toMatch(REFUSED);
      expect(reply.error).toMatch(message);
      expect((await migrateStatus(on))['state']).toBe('idle');
      expect(existsSync(stateFile)).toBe(false);
      expect(await dumpAll(direct(source))).toEqual(sourceBefore);
      expect(await dumpAll(direct(holding))).toEqual(holdingBefore);
      expect(await locked.call('DBSIZE')).toBe(0);
      expect(await redis7.call('DBSIZE')).toBe(0);
      for (const n of cluster.nodes) expect(await n.call('DBSIZE')).toBe(0);
    };

    // Nobody listens there.
    await refused([`127.0.0.1:${await freePort()}`], /cannot reach 127\.0\.0\.1:\d+/);
    // The target wants a password respool does not have (neither upstreamAuth nor migration.upstreamAuth).
    await refused([locked.address], /NOAUTH|auth/i);
    // It holds keys: not without MERGE.
    await refused([holding.address], /holds 3 keys/);
    // Redis 7.0 (RDB 10) cannot RESTORE Valkey 8's DUMP (RDB 11); the probe leaves no key there.
    await refused([redis7.address], /cannot restore the source's DUMP format/);
    // A cluster has database 0 only.
    await c.select(2);
    await c.set('r:in-db-2', 'x');
    await c.select(0);
    const withDb2 = await dumpAll(direct(source, 2));
    await refused([cluster.nodes[0]!.address], /database 2/);
    expect(await dumpAll(direct(source, 2))).toEqual(withDb2);
    await direct(source, 2).del('r:in-db-2');
    // Not host:port.
    expect(await migrate(c, 'START', 'nowhere')).toEqual({ error: 'ERR the target must be host:port' });

    // With migration.upstreamAuth the locked target signs respool in: a wrong password is refused, the right one copies.
    const wrongAuth = await proxyFor([at(source)], { migration: { stateFile: stateFileName(), upstreamAuth: { username: null, password: 'not-the-password' } } } as never);
    const w = client(wrongAuth);
    const reply = (await migrate(w, 'START', locked.address)) as { error?: string };
    expect(reply.error).toMatch(REFUSED);
    expect(reply.error).toMatch(/WRONGPASS|invalid|auth/i);
    expect(await locked.call('DBSIZE')).toBe(0);
    const rightAuth = await proxyFor([at(source)], { migration: { stateFile: stateFileName(), upstreamAuth: { username: null, password: 'target-secret-pw' } } } as never);
    const r = client(rightAuth);
    expect(await migrate(r, 'START', locked.address)).toBe('OK');
    await waitForState(r, 'synced', 30_000, ['aborted', 'paused']);
    await sameEverywhere(source, locked);

    // MERGE copies over a target that holds keys: the source's keys replace theirs, their others stay.
    expect(await migrate(c, 'START', holding.address, 'MERGE')).toBe('OK');
    expect(existsSync(stateFile)).toBe(true);
    // One at a time.
    expect(((await migrate(c, 'START', holding.address, 'MERGE')) as { error: string }).error).toMatch(/already/);
    await waitForState(c, 'synced', 30_000, ['aborted', 'paused']);
    const merged = direct(holding);
    expect(await merged.get('r:str:1')).toBe(await direct(source).get('r:str:1'));
    expect(await merged.get('theirs')).toBe('kept');
    expect(await merged.hgetall('theirs:h')).toEqual({ a: '1' });
    expect(Number(await holding.call('DBSIZE'))).toBe(sourceBefore.size + 2);
    // ABORT of a MERGE does not empty the target (it was not empty).
    expect(await migrate(c, 'ABORT')).toBe('aborted');
    expect(await merged.get('theirs')).toBe('kept');
    expect(existsSync(stateFile)).toBe(false);
    expect(await dumpAll(direct(source))).toEqual(sourceBefore);
  }, 90_000);
});

describe('migration ABORT', () => {
  it('mid-copy to a cluster: the source exactly as it was, the target empty again, writes no longer carried', async () => {
    const [source, target] = await Promise.all([startStandalone(), startCluster({ primaries: 3, replicasPerPrimary: 0 })]);
    keep(source);
    keep(target);
    const stateFile = stateFileName();
    const proxy = await proxyFor([at(source)], { migration: { stateFile, maxKeysPerSecond: 1_000, batchKeys: 50 } } as never);
    const c = client(proxy);
    await seedKeyspace(c, 'a:', MEDIUM);
    const before = await dumpAll(direct(source));
    expect(await migrate(c, 'START', target.nodes[0]!.address)).toBe('OK');
    await waitFor(async () => Number((await migrateStatus(c))['copied']) > 500, 'some keys copied', 15_000);
    const mid = await migrateStatus(c);
    expect(mid['state']).toBe('copying');
    expect(existsSync(stateFile)).toBe(true);
    let onTarget = 0;
    for (const n of target.nodes) onTarget += Number(await n.call('DBSIZE'));
    expect(onTarget).toBeGreaterThan(400);
    // Reads through respool go on meanwhile.
    expect(await c.get('a:str:7')).toBe(await direct(source).get('a:str:7'));

    expect(await migrate(c, 'ABORT')).toBe('aborted: the target was emptied');
    expect((await migrateStatus(c))['state']).toBe('aborted');
    expect(existsSync(stateFile)).toBe(false);
    for (const n of target.nodes) expect(await n.call('DBSIZE'), n.address).toBe(0);
    expect(await dumpAll(direct(source))).toEqual(before);
    // Nothing reaches the target later, writes included; a second ABORT has nothing to abort.
    expect(await c.set('a:after-abort', 'x')).toBe('OK');
    await sleep(1_500);
    for (const n of target.nodes) expect(await n.call('DBSIZE'), n.address).toBe(0);
    expect(((await migrate(c, 'ABORT')) as { error: string }).error).toMatch(REFUSED);
    // FLUSHALL, refused while the migration ran, is allowed again.
    expect(await direct(source).get('a:after-abort')).toBe('x');
  }, 60_000);

  it('FLUSHALL, FLUSHDB and SWAPDB are refused while a migration runs', async () => {
    const [source, target] = await Promise.all([keepStarted(startStandalone()), keepStarted(startStandalone())]);
    const proxy = await proxyFor([at(source)], { migration: { maxKeysPerSecond: 200 } } as never);
    const c = client(proxy);
    await seedKeyspace(c, 'f:', SMALL);
    const before = await dumpAll(direct(source));
    expect(await migrate(c, 'START', target.address)).toBe('OK');
    for (const cmd of [['FLUSHALL'], ['FLUSHDB'], ['SWAPDB', '0', '1']]) {
      await expect(c.call(cmd[0]!, ...cmd.slice(1)), cmd.join(' ')).rejects.toThrow(/respool: .*refused while a migration runs/);
    }
    expect(await dumpAll(direct(source))).toEqual(before);
    expect(await migrate(c, 'ABORT')).toBe('aborted: the target was emptied');
    expect(await target.call('DBSIZE')).toBe(0);
    expect(await c.flushall()).toBe('OK');
    expect(await source.call('DBSIZE')).toBe(0);
  }, 30_000);
});

describe('migration across a respool restart', () => {
  it('a respool started with the same upstreams and stateFile resumes the copy, compares every key, and is synced', async () => {
    const [source, target] = await Promise.all([keepStarted(startStandalone()), keepStarted(startStandalone())]);
    const stateFile = stateFileName();
    const settings = { migration: { stateFile, maxKeysPerSecond: 600, batchKeys: 50 } } as never;
    const first = await startTestProxy([at(source)], settings);
    let firstOpen = true;
    keep({ stop: async () => void (firstOpen && (await first.close())) });
    const c1 = clientFor(first);
    const seeded = await seedKeyspace(c1, 's:', MEDIUM);
    const writerBefore = new ModelWriter(c1, 1, 300);
    writerBefore.start();
    expect(await migrate(c1, 'START', target.address)).toBe('OK');
    await waitFor(async () => Number((await migrateStatus(c1))['copied']) > 1_500, 'a part of the copy', 20_000);
    const mid = await migrateStatus(c1);
    expect(mid['state']).toBe('copying');
    await sleep(1_100); // the progress is saved every second
    // respool stops mid-copy, its writer's last writes with it.
    await writerBefore.stop();
    c1.disconnect();
    await first.close();
    firstOpen = false;
    expect(writerBefore.errors).toEqual([]);
    expect(writerBefore.mismatches).toEqual([]);
    const saved = JSON.parse(readFileSync(stateFile, 'utf8')) as { tasks: Array<{ cursor: string; done: boolean }>; counts: { copied: number } };
    expect(saved.tasks).toHaveLength(1);
    expect(saved.tasks[0]!.done).toBe(false);
    expect(saved.tasks[0]!.cursor).not.toBe('0');
    expect(saved.counts.copied).toBeGreaterThan(1_000);
    const copiedKeys = await scanKeys(direct(target));
    expect(copiedKeys.length).toBeGreaterThan(1_000);
    // While no respool runs, a key the copy already carried changes on the source (as a write
    // acknowledged just before the stop whose copy did not run).
    const changed = copiedKeys.find((k) => k.startsWith('s:str:'))!;
    await direct(source).set(changed, 'changed while respool was down');
    // And one is deleted (as a DEL acknowledged just before the stop whose copy, a DEL on the target, did not run).
    const deleted = copiedKeys.find((k) => k.startsWith('s:hash:'))!;
    expect(await direct(source).del(deleted)).toBe(1);

    const second = await proxyFor([at(source)], settings);
    const c2 = client(second);
    const resumed = await migrateStatus(c2);
    expect(resumed['resumed']).toBe('true');
    expect(Number(resumed['copied'])).toBeGreaterThanOrEqual(saved.counts.copied); // the counts go on from the saved ones
    // Every state it passes through on the way (a resumed copy has no reason to pause: both sides answer).
    const pauses: string[] = [];
    const note = (st: Record<string, unknown>) => {
      if (st['state'] === 'paused') pauses.push(String(st['reason']));
    };
    note(resumed);
    const writerAfter = new ModelWriter(c2, 2, 300);
    writerAfter.start();
    const synced = await waitForState(c2, 'synced', 40_000, ['aborted'], note);
    await writerAfter.stop();
    expect(writerAfter.errors).toEqual([]);
    expect(writerAfter.mismatches).toEqual([]);
    expect(synced['resumed']).toBe('true');
    // Having resumed, it compared every key of the source (not a sample).
    expect(Number(synced['verified'])).toBeGreaterThanOrEqual(seeded.length);
    await waitFor(async () => {
      const s = await migrateStatus(c2);
      return s['copies_in_flight'] === 0 && s['dirty'] === 0;
    }, 'the writes\' copies', 5_000);
    expect(await direct(target).get(changed)).toBe('changed while respool was down');
    const keys = await scanKeys(direct(source));
    const targetKeys = await scanKeys(direct(target));
    expect(targetKeys.filter((k) => k !== deleted)).toEqual(keys);
    const t = Date.now();
    const want = await readKeys(direct(source), keys);
    expect(differences(want, t, await readKeys(direct(target), keys), Date.now())).toEqual([]);
    const now = Date.now();
    const model = new Map([...writerBefore.expected(now), ...writerAfter.expected(now)]);
    expect(differences(model, now, await readKeys(direct(target), [...model.keys()]), Date.now())).toEqual([]);
    // Last, both reported: the key deleted on the source is gone from the target too (the resumed
    // compare scans the target as well), and the resumed migration never paused (resumeSaved()
    // discovers both sides before the first copy).
    expect.soft(targetKeys, 'a key deleted on the source after its copy, before the resume').not.toContain(deleted);
    expect.soft([...new Set(pauses)], 'paused after the resume').toEqual([]);
  }, 90_000);

  it('after the cutover, a respool restarted with the source still in its config serves from the target (source up, then gone); a config naming the target drops the record', async () => {
    const [source, target] = await Promise.all([keepStarted(startStandalone({ password: 'source-pw' })), keepStarted(startStandalone({ password: 'target-pw' }))]);
    const stateFile = stateFileName();
    const record = cutoverRecordPath(stateFile);
    const settings = { upstreamAuth: { username: null, password: 'source-pw' }, migration: { stateFile, upstreamAuth: { username: null, password: 'target-pw' } } } as never;
    const first = await startTestProxy([at(source)], settings);
    let firstOpen = true;
    keep({ stop: async () => void (firstOpen && (await first.close())) });
    const c1 = clientFor(first);
    await seedKeyspace(c1, 's:', SMALL);
    expect(await migrate(c1, 'START', target.address)).toBe('OK');
    await waitForState(c1, 'synced', 30_000, ['aborted', 'paused']);
    expect(existsSync(record)).toBe(false);
    expect(await migrate(c1, 'CUTOVER')).toEqual(expect.stringMatching(/^cut over/));
    expect(existsSync(record)).toBe(true);
    expect(readFileSync(record, 'utf8')).not.toMatch(/-pw|upstreamAuth/); // the credentials come from the config
    c1.disconnect();
    await first.close();
    firstOpen = false;

    // The source still answers: a restart from the same config must not write there.
    const onSource = direct({ ...at(source), password: 'source-pw' });
    const onTarget = direct({ ...at(target), password: 'target-pw' });
    const second = await proxyFor([at(source)], settings);
    expect(second.config.upstreams).toEqual([at(target)]);
    const c2 = client(second);
    expect(await c2.set('after-restart', 'x')).toBe('OK');
    expect(await onTarget.get('after-restart')).toBe('x');
    expect(await onSource.get('after-restart')).toBe(null);
    expect(await c2.get('s:str:1')).toBe(await onTarget.get('s:str:1'));
    await second.close();

    // The source gone: the same.
    onSource.disconnect();
    await source.stop();
    const third = await proxyFor([at(source)], settings);
    const c3 = client(third);
    expect(await c3.set('source-gone', 'y')).toBe('OK');
    expect(await onTarget.get('source-gone')).toBe('y');
    expect(existsSync(record)).toBe(true);
    await third.close();

    // The operator put the target in the config: the record is done with.
    const fourth = await proxyFor([at(target)], { ...(settings as object), upstreamAuth: { username: null, password: 'target-pw' } } as never);
    expect(existsSync(record)).toBe(false);
    expect(await client(fourth).get('source-gone')).toBe('y');
  }, 90_000);
});

describe('a target that stops answering mid-copy', () => {
  it('pauses with a reason, clients are served meanwhile, and goes on to synced once the target answers', async () => {
    const [source, target] = await Promise.all([keepStarted(startStandalone()), keepStarted(startStandalone())]);
    const relay = await FaultRelay.start(at(target));
    keep({ stop: () => relay.close() });
    const proxy = await proxyFor([at(source)], {
      timeouts: { connectMs: 1_000, commandMs: 1_500 },
      migration: { maxKeysPerSecond: 800, batchKeys: 50 },
    } as never);
    const c = client(proxy);
    await seedKeyspace(c, 'p:', MEDIUM);
    const writer = new ModelWriter(client(proxy), 7, 300);
    writer.start();
    try {
      expect(await migrate(c, 'START', `${relay.host}:${relay.port}`)).toBe('OK');
      await waitFor(async () => Number((await migrateStatus(c))['copied']) > 800, 'a part of the copy', 15_000);
      relay.set({ blackhole: true });
      const paused = await waitForState(c, 'paused', 15_000);
      expect(paused['reason']).toEqual(expect.stringMatching(/.+/));
      const opsPaused = writer.ops;
      // Clients are served while it is paused; their writes wait as dirty keys.
      for (let i = 0; i < 20; i++) {
        expect(await c.set(`p:while-paused:${i}`, String(i))).toBe('OK');
        expect(await c.get(`p:while-paused:${i}`)).toBe(String(i));
      }
      await sleep(2_500); // more than one retry
      const still = await migrateStatus(c);
      expect(still['state']).toBe('paused');
      expect(still['reason']).toEqual(expect.stringMatching(/.+/));
      expect(Number(still['dirty'])).toBeGreaterThan(0);
      expect(writer.ops - opsPaused).toBeGreaterThan(300);
      expect(writer.errors).toEqual([]);
      expect(((await migrate(c, 'CUTOVER')) as { error: string }).error).toMatch(/CUTOVER needs a synced migration; this one is paused/);

      relay.set({ blackhole: false });
      const synced = await waitForState(c, 'synced', 40_000, ['aborted']);
      expect(synced['reason']).toBe(null);
      expect(synced['dirty']).toBe(0);
    } finally {
      await writer.stop();
    }
    expect(writer.errors).toEqual([]);
    expect(writer.mismatches).toEqual([]);
    await waitFor(async () => (await migrateStatus(c))['copies_in_flight'] === 0, 'the writes\' copies', 5_000);
    await sameEverywhere(source, target);
    for (let i = 0; i < 20; i++) expect(await direct(target).get(`p:while-paused:${i}`)).toBe(String(i));
    // And the cutover to it.
    expect(await migrate(c, 'CUTOVER')).toMatch(/^cut over/);
    await source.stop();
    const now = Date.now();
    const model = writer.expected(now);
    expect(differences(model, now, await readKeys(c, [...model.keys()]), Date.now())).toEqual([]);
  }, 90_000);
});
