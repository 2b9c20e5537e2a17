/**
 * Live migration in a fleet (src/migration/fleet-migration.ts): the member that ran START
 * coordinates, every other member carries its own clients' writes, and they meet in the fleet's
 * shared state (doc.migration, acks, dirty keys, forwarded commands). The cutover holds, drains
 * and switches every member.
 *
 *   - two members, writers on both (verified SET, INCR, HSET, RPUSH, DEL, EXPIRE): START through B,
 *     STATUS and CUTOVER through A (run by B); synced; the source stopped; writers go on; every key
 *     as its writer was told, read through both members; a member started after the cutover (the
 *     source still up) follows the doc to the target
 *   - ABORT through the member that did not START empties the target; then a START from it is taken
 *   - a coordinator gone for good: START on another member is refused naming it; ABORT there stops
 *     every member carrying; then a START is taken
 *   - both sides with passwords: no credential in the fleet's shared state on either side (any
 *     client of the nodes could read it), and every member still signs in at both with its own;
 *     a member restarted after the cutover, the source gone, its config unchanged, serves from
 *     the target (its record of the move, beside its migration.stateFile)
 */
import { rmSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { cutoverRecordPath } from '../../src/migration/cutover-record.js';
import { Valkey } from 'iovalkey';
import { freePort, startCluster, startStandalone } from '../harness/valkey-processes.js';
import { startFleetMember } from '../helpers/proxy.js';
import type { RespoolProxy } from '../../src/server.js';
import { differences, migrate, migrateStatus, ModelWriter, readKeys, seedKeyspace, TestResources, waitForState, writersGoOnThenStop } from '../helpers/migration.js';
import { sleep, waitFor } from '../helpers/wait.js';

const resources = new TestResources();
afterEach(resources.stopAll);
const { keep, keepStarted, client, direct } = resources;

/** A fleet of `count` members in front of `upstream` (more can join on the spare ports; one can be restarted with its files). */
async function fleet(upstream: { host: string; port: number }, count: number, spare = 1, settings: Record<string, unknown> = {}): Promise<{ members: RespoolProxy[]; join(): Promise<RespoolProxy>; restart(member: RespoolProxy): Promise<RespoolProxy> }> {
  const ports = await Promise.all(Array.from({ length: count + spare }, () => freePort()));
  const members: RespoolProxy[] = [];
  const start = async (port: number, stateFile?: string) => {
    const { migration, ...rest } = settings as { migration?: Record<string, unknown> };
    const proxy = await startFleetMember([upstream], ports, port, { ...rest, migration: { maxKeysPerSecond: 2_000, ...migration, ...(stateFile === undefined ? {} : { stateFile }) } } as never);
    keep({
      stop: async () => {
        await proxy.close();
        for (const file of [proxy.config.migration.stateFile, cutoverRecordPath(proxy.config.migration.stateFile)]) rmSync(file, { force: true });
      },
    });
    members.push(proxy);
    return proxy;
  };
  for (const port of ports.slice(0, count)) await start(port);
  await waitFor(() => members.every((p) => p.fleetState!.liveMembers().length === count), 'every member registered', 10_000);
  let next = count;
  return {
    members,
    join: () => start(ports[next++]!),
    restart: async (member) => {
      await member.close();
      return start(member.address.port, member.config.migration.stateFile);
    },
  };
}

describe('live migration in a fleet', () => {
  it('writers on two members; START through B, CUTOVER through A; the source stopped; a member started later follows', async () => {
    const [source, target] = await Promise.all([keepStarted(startCluster({ primaries: 3, replicasPerPrimary: 0 })), keepStarted(startStandalone())]);
    const seed = { host: source.nodes[0]!.host, port: source.nodes[0]!.port };
    const { members, join } = await fleet(seed, 2);
    const [a, b] = members as [RespoolProxy, RespoolProxy];
    const onA = client(a);
    const onB = client(b);
    const seeded = await seedKeyspace(onA, 'seed:');
    const seedAt = Date.now();
    const seedValues = await readKeys(onA, seeded);

    const writers = [client(a), client(a), client(b), client(b)].map((c, i) => new ModelWriter(c, i, 400));
    for (const w of writers) w.start();
    const ops = () => writers.reduce((n, w) => n + w.ops, 0);
    try {
      await waitFor(() => ops() > 300, 'the writers to get going', 10_000);
      expect(await migrate(onB, 'START', `${target.host}:${target.port}`)).toBe('OK');
      // A knows B runs it: its STATUS is B's, and a START through A is refused.
      await waitFor(async () => (await migrateStatus(onA))['state'] !== 'idle', 'STATUS through A to show the migration', 5_000);
      const second = (await migrate(onA, 'START', `${target.host}:${target.port}`)) as { error?: string };
      expect(second.error).toMatch(/runs a migration now|is copying already|is synced already|is verifying already/);
      const synced = await waitForState(onA, 'synced', 60_000, ['aborted', 'paused']);
      expect(synced['reason']).toBe(null);
      expect(Number(synced['copied'])).toBeGreaterThanOrEqual(seeded.length);
      await sleep(1_200); // A's counts come every second
      const counted = await migrateStatus(onB);
      expect(Number(counted['mirrored'])).toBeGreaterThan(0);
      expect.soft(counted['mismatched'], 'mismatched at synced').toBe(0);

      const cut = await migrate(onA, 'CUTOVER');
      expect(cut, `CUTOVER through A replied ${JSON.stringify(cut)}`).toEqual(expect.stringMatching(/^cut over: writes held [\d.]+ ms$/));
      expect((await migrateStatus(onB))['state']).toBe('cut-over');

      // A member started now (the source still up) learns from the shared state where the upstreams went.
      const c = await join();
      const onC = client(c);
      await waitFor(async () => (await onC.set('from-c', 'joined')) === 'OK' && (await direct(target).get('from-c')) === 'joined', 'C writing to the target', 10_000);

      await source.stop();
    } catch (err) {
      await Promise.all(writers.map((w) => w.stop()));
      throw err;
    }
    const { expected, at: now } = await writersGoOnThenStop(writers);
    for (const reader of [onA, onB]) expect(differences(expected, now, await readKeys(reader, [...expected.keys()]), Date.now())).toEqual([]);
    expect(differences(seedValues, seedAt, await readKeys(onB, seeded), Date.now())).toEqual([]);
    // The fleet's migration keys stayed on their side: none on the target.
    const onTarget = new Valkey({ host: target.host, port: target.port, maxRetriesPerRequest: 0 });
    try {
      expect((await onTarget.keys('{respool-fleet}:migration-*')).filter((k) => !k.endsWith('acks') && !k.includes('status') && !k.includes('reply'))).toEqual([]);
    } finally {
      onTarget.disconnect();
    }
  }, 120_000);

  it('ABORT through the member that did not START empties the target; writes through both members reached the source', async () => {
    const [source, target] = await Promise.all([keepStarted(startCluster({ primaries: 3, replicasPerPrimary: 0 })), keepStarted(startStandalone())]);
    const seed = { host: source.nodes[0]!.host, port: source.nodes[0]!.port };
    const { members } = await fleet(seed, 2, 0);
    const [a, b] = members as [RespoolProxy, RespoolProxy];
    const onA = client(a);
    const onB = client(b);
    await seedKeyspace(onA, 'seed:', { strings: 2000, hashes: 20, lists: 20, sets: 20, zsets: 20, streams: 1, withTtl: 20 });
    expect(await migrate(onA, 'START', `${target.host}:${target.port}`)).toBe('OK');
    await waitFor(async () => (await migrateStatus(onB))['state'] === 'copying', 'B to see A\'s migration', 5_000);
    for (let i = 0; i < 50; i++) {
      await onA.set(`a:${i}`, 'x');
      await onB.set(`b:${i}`, 'y');
    }
    const aborted = await migrate(onB, 'ABORT');
    expect(aborted, JSON.stringify(aborted)).toBe('aborted: the target was emptied');
    await sleep(500);
    expect(await direct(target).dbsize()).toBe(0);
    // A change of the fleet's state after the ABORT (a split rule) is not written on the emptied target.
    expect(await onA.call('RESPOOL', 'SPLIT', 'ADD', 'after-abort-hot')).toBe('OK');
    await sleep(500);
    expect(await direct(target).dbsize()).toBe(0);
    expect(await onB.get('a:49')).toBe('x');
    expect(await onA.get('b:49')).toBe('y');
    // A new START through B is taken now that A's migration ended.
    expect(await migrate(onB, 'START', `${target.host}:${target.port}`)).toBe('OK');
    await waitFor(async () => (await migrateStatus(onA))['state'] === 'copying', 'A to see B\'s migration', 5_000);
    expect(await migrate(onA, 'ABORT')).toBe('aborted: the target was emptied');
  }, 90_000);

  it('a coordinator gone for good: START elsewhere is refused naming it, ABORT there stops every member carrying, then a START is taken', async () => {
    const [source, target] = await Promise.all([keepStarted(startCluster({ primaries: 3, replicasPerPrimary: 0 })), keepStarted(startStandalone())]);
    const seed = { host: source.nodes[0]!.host, port: source.nodes[0]!.port };
    const { members } = await fleet(seed, 2, 0);
    const [a, b] = members as [RespoolProxy, RespoolProxy];
    const onA = client(a);
    await seedKeyspace(onA, 'seed:', { strings: 3000, hashes: 10, lists: 10, sets: 10, zsets: 10, streams: 1, withTtl: 10 });
    const onB = client(b);
    expect(await migrate(onB, 'START', `${target.host}:${target.port}`)).toBe('OK');
    await waitFor(async () => (await migrateStatus(onA))['state'] === 'copying', 'A to see B\'s migration', 5_000);
    onB.disconnect();
    await b.close(); // B stops for good, mid-copy
    await waitFor(() => !a.fleetState!.liveMembers().some((id) => id !== a.fleetState!.memberId), 'B no longer a live member', 15_000);
    const refused = (await migrate(onA, 'START', `${target.host}:${target.port}`)) as { error?: string };
    expect(refused.error).toMatch(/is gone: RESPOOL MIGRATE ABORT here stops/);
    const aborted = await migrate(onA, 'ABORT');
    expect(aborted).toEqual(expect.stringMatching(/^aborted: the coordinator .* is gone; every member stopped carrying/));
    // A no longer carries: its writes stay on the source only.
    await waitFor(async () => {
      await onA.set('after-abort', 'x');
      await sleep(100);
      return (await direct(target).exists('after-abort')) === 0;
    }, 'A to stop carrying', 5_000);
    await direct(target).flushall();
    expect(await migrate(onA, 'START', `${target.host}:${target.port}`)).toBe('OK');
    expect(await migrate(onA, 'ABORT')).toBe('aborted: the target was emptied');
  }, 90_000);

  it('sides with passwords: the shared state on either side holds no credential; every member carries and switches with its own; one restarted after, the source gone, serves from the target', async () => {
    const [source, target] = await Promise.all([keepStarted(startStandalone({ password: 'source-secret-1' })), keepStarted(startStandalone({ password: 'target-secret-2' }))]);
    const { members, restart } = await fleet({ host: source.host, port: source.port }, 2, 0, {
      upstreamAuth: { username: null, password: 'source-secret-1' },
      migration: { upstreamAuth: { username: null, password: 'target-secret-2' } },
    });
    const [a, b] = members as [RespoolProxy, RespoolProxy];
    const onA = client(a);
    const onB = client(b);
    await seedKeyspace(onA, 'seed:', { strings: 500, hashes: 5, lists: 5, sets: 5, zsets: 5, streams: 1, withTtl: 5 });
    expect(await migrate(onA, 'START', `${target.host}:${target.port}`)).toBe('OK');
    await waitFor(async () => (await migrateStatus(onB))['state'] !== 'idle', 'B to see A\'s migration', 5_000);
    for (let i = 0; i < 50; i++) expect(await onB.set(`b:${i}`, `v${i}`)).toBe('OK'); // carried by B, signed in at the target with its own
    await waitForState(onA, 'synced', 60_000, ['aborted', 'paused']);
    expect(await migrate(onB, 'CUTOVER')).toEqual(expect.stringMatching(/^cut over/));
    expect(await onB.set('after-cutover', 'on-target')).toBe('OK');
    const onSource = direct({ host: source.host, port: source.port, password: 'source-secret-1' });
    const onTarget = direct({ host: target.host, port: target.port, password: 'target-secret-2' });
    expect(await onTarget.get('b:49')).toBe('v49');
    expect(await onTarget.get('after-cutover')).toBe('on-target');
    expect(await onSource.get('after-cutover')).toBe(null);
    for (const side of [onSource, onTarget]) {
      const keys = await side.keys('{respool-fleet}:*');
      expect(keys).toContain('{respool-fleet}:state');
      for (const key of keys) {
        const type = await side.type(key);
        const text = type === 'string' ? await side.get(key) : type === 'hash' ? JSON.stringify(await side.hgetall(key)) : type === 'list' ? JSON.stringify(await side.lrange(key, 0, -1)) : '';
        expect(text ?? '', `${key} (${type})`).not.toMatch(/secret-|upstreamAuth|password/);
      }
    }
    // B restarted with its config unchanged (the source as its upstream) once the source is gone.
    onSource.disconnect();
    await source.stop();
    const b2 = await restart(b);
    expect(b2.config.upstreams).toEqual([{ host: target.host, port: target.port }]);
    const onB2 = client(b2);
    expect(await onB2.get('b:49')).toBe('v49');
    expect(await onB2.set('after-restart', 'b2')).toBe('OK');
    expect(await onTarget.get('after-restart')).toBe('b2');
  }, 90_000);
});
