/**
 * A migration over several processes (src/migration), without servers: confirmed copies, the
 * name a copy in parts builds, the coordinator's IPC channel and the supervisor's relay, the
 * credentials each process signs in with (never told to another), and the bound on the keys a
 * paused migration keeps to copy.
 */
import calculateSlot from 'cluster-key-slot';
import type { Worker } from 'node:cluster';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { KeyCopier, KeyKeptChanging } from '../../src/migration/key-copier.js';
import { partsName } from '../../src/migration/copy-in-parts.js';
import { JOIN_ENV, MIGRATION_MESSAGE, MigrationMembers, type MigrationMessage } from '../../src/migration/migration-members.js';
import { MigrationRelay } from '../../src/workers/migration-relay.js';
import { Migration } from '../../src/migration/migration.js';
import type { MigrationSide, SidePlace } from '../../src/migration/migration-side.js';
import { placeOf, SignIns } from '../../src/migration/sign-ins.js';
import { DEFAULT_CONFIG } from '../../src/config/defaults.js';
import type { RespoolConfig } from '../../src/config/types.js';
import type { RespValue } from '../../src/resp/decode.js';

type Call = Array<string | Buffer | number>;

function fakeSide(answer: (args: Call) => RespValue | Promise<RespValue>): { side: MigrationSide; calls: string[][] } {
  const calls: string[][] = [];
  const side = {
    isCluster: false,
    callFor: async (_key: Buffer, _db: number, args: Call) => {
      calls.push(args.map((a) => (Buffer.isBuffer(a) ? a.toString('latin1') : String(a))));
      return answer(args);
    },
  } as unknown as MigrationSide;
  return { side, calls };
}

describe('confirmed copies (several processes copy one key)', () => {
  it('reads DUMP + PEXPIRETIME, restores with that absolute expiry, reads again and stops when the source still holds it', async () => {
    const source = fakeSide((args) => (args[0] === 'DUMP' ? Buffer.from('p1') : 1_900_000_000_000));
    const target = fakeSide(() => 'OK');
    const copier = new KeyCopier(source.side, target.side, () => {}, Number.POSITIVE_INFINITY, true);
    await copier.copy(0, Buffer.from('k'), 'write');
    expect(source.calls.map((c) => c[0])).toEqual(['DUMP', 'PEXPIRETIME', 'DUMP', 'PEXPIRETIME']);
    expect(target.calls).toEqual([['RESTORE', 'k', '1900000000000', 'p1', 'REPLACE', 'ABSTTL']]);
  });

  it('copies again while the source changed since its read (another process\'s older RESTORE may have landed after this one)', async () => {
    const values = ['v1', 'v2', 'v2'];
    let dumps = 0;
    const source = fakeSide((args) => (args[0] === 'DUMP' ? Buffer.from(values[Math.min(dumps++, values.length - 1)]!) : -1));
    const target = fakeSide(() => 'OK');
    const copier = new KeyCopier(source.side, target.side, () => {}, Number.POSITIVE_INFINITY, true);
    await copier.copy(0, Buffer.from('k'), 'write');
    // v1 restored, the read after it saw v2: v2 restored, the read after that saw v2 again.
    expect(target.calls.map((c) => c[3])).toEqual(['v1', 'v2']);
  });

  it('an expiry changed since its read (EXPIRE) counts as a change; a key gone on both reads is a DEL once', async () => {
    let reads = 0;
    const source = fakeSide((args) => (args[0] === 'DUMP' ? Buffer.from('same') : reads++ === 0 ? -1 : 1_900_000_000_000));
    const target = fakeSide(() => 'OK');
    await new KeyCopier(source.side, target.side, () => {}, Number.POSITIVE_INFINITY, true).copy(0, Buffer.from('k'), 'write');
    expect(target.calls.map((c) => c[2])).toEqual(['0', '1900000000000']);
    const gone = fakeSide((args) => (args[0] === 'DUMP' ? null : -2));
    const onTarget = fakeSide(() => 1);
    await new KeyCopier(gone.side, onTarget.side, () => {}, Number.POSITIVE_INFINITY, true).copy(0, Buffer.from('k'), 'write');
    expect(onTarget.calls).toEqual([['DEL', 'k']]);
  });

  it('a key that changes on every read is given up after 50 copies (KeyKeptChanging), reported to the migration', async () => {
    let n = 0;
    const source = fakeSide((args) => (args[0] === 'DUMP' ? Buffer.from(`v${n++}`) : -1));
    const failures: Error[] = [];
    const copier = new KeyCopier(source.side, fakeSide(() => 'OK').side, (_db, _key, err) => failures.push(err), Number.POSITIVE_INFINITY, true);
    await expect(copier.copy(0, Buffer.from('hot'), 'write')).rejects.toBeInstanceOf(KeyKeptChanging);
    expect(failures[0]).toBeInstanceOf(KeyKeptChanging);
  });

  it('a copy in parts builds a name in the key\'s slot (its own hash tag, or the key as one)', () => {
    for (const key of ['plain', 'user:{42}:cart', '{tag}rest', 'a{b', 'x}y{z}']) {
      const name = partsName(Buffer.from(key), true);
      expect(name, key).not.toBeNull();
      expect(calculateSlot(name!), key).toBe(calculateSlot(Buffer.from(key)));
      expect(name!.equals(Buffer.from(key))).toBe(false);
    }
    expect(partsName(Buffer.from('a}b'), true)).toBeNull(); // {a}b} would hash "a": built in place
    expect(partsName(Buffer.from('{}empty-tag'), true)).toBeNull(); // an empty tag hashes the whole key, which holds a }
    expect(partsName(Buffer.from('a}b'), false)!.toString()).toMatch(/^a}b:respool-migration-part:/); // no slots on a standalone
  });
});

describe('the coordinator\'s IPC channel and the supervisor\'s relay', () => {
  const address: SidePlace = { seeds: [{ host: '127.0.0.1', port: 7000 }], mode: 'auto', signIn: 'migration' };

  /** Three fake workers behind a relay; worker 0's channel. */
  function rig() {
    const inbox: MigrationMessage[][] = [[], [], []];
    const dead = new Set<number>();
    const workers = [0, 1, 2].map((i) => ({
      isDead: () => dead.has(i),
      isConnected: () => !dead.has(i),
      send: (msg: MigrationMessage) => inbox[i]!.push(msg),
    }) as unknown as Worker);
    const relay = new MigrationRelay((i) => workers[i], () => 3);
    const members = new MigrationMembers((msg) => relay.relay(0, msg));
    return { inbox, dead, relay, members };
  }

  it('an op goes to every other worker; the coordinator is told how many, and ask() resolves with their acks', async () => {
    const { inbox, relay, members } = rig();
    const asked = members.ask({ op: 'hold', deadline: Date.now() + 1000 }, 1_000);
    expect(inbox[1]!.map((m) => m.kind)).toEqual(['op']);
    expect(inbox[2]!.map((m) => m.kind)).toEqual(['op']);
    const sent = inbox[0]!.shift()!;
    expect(sent).toMatchObject({ kind: 'sent', count: 2 });
    members.receive(sent);
    const seq = (inbox[1]![0] as { seq: number }).seq;
    relay.relay(1, { type: MIGRATION_MESSAGE, to: 'coordinator', kind: 'ack', seq, error: null });
    relay.relay(2, { type: MIGRATION_MESSAGE, to: 'coordinator', kind: 'ack', seq, error: 'writes did not drain' });
    for (const msg of inbox[0]!.splice(0)) members.receive(msg);
    expect(await asked).toEqual(['worker 2: writes did not drain']);
  });

  it('a worker that does not answer makes ask() resolve with an error at its timeout', async () => {
    const { inbox, members } = rig();
    const asked = members.ask({ op: 'stop' }, 50);
    members.receive(inbox[0]!.shift()!);
    expect(await asked).toEqual(['2 of 2 workers did not answer \'stop\' within 50 ms']);
  });

  it('a dead worker is not waited for; counts are summed by process, a replaced worker\'s kept', async () => {
    const { inbox, dead, members } = rig();
    dead.add(2);
    void members.ask({ op: 'stop' }, 1_000);
    expect(inbox[0]!.shift()).toMatchObject({ kind: 'sent', count: 1 });
    const counts = (pid: number, mirrored: number) => ({ type: MIGRATION_MESSAGE, to: 'coordinator', kind: 'counts', counts: { copied: 0, mirrored, recopied: 0, deleted: 0, bytes: 0, writesSeen: mirrored, pid } }) as MigrationMessage;
    members.receive(counts(101, 5));
    members.receive(counts(102, 7));
    members.receive(counts(101, 6));
    expect(members.total()).toMatchObject({ mirrored: 13, writesSeen: 13 });
  });

  it('a worker started later joins the carry in force and where a cutover pointed the upstreams; worker 0 gets only the latter', () => {
    const { relay } = rig();
    expect(relay.joinEnv(1)).toEqual({});
    const carry = { op: 'carry' as const, from: address, to: { ...address, seeds: [{ host: '127.0.0.1', port: 7100 }] }, maxPayloadBytes: 1024 };
    relay.relay(0, { type: MIGRATION_MESSAGE, to: 'members', kind: 'op', seq: 1, op: carry });
    expect(JSON.parse(relay.joinEnv(1)[JOIN_ENV]!)).toEqual({ carry, switched: null });
    expect(relay.joinEnv(0)).toEqual({});
    relay.relay(0, { type: MIGRATION_MESSAGE, to: 'members', kind: 'op', seq: 2, op: { op: 'switch', to: carry.to } });
    // A switch ends the carry.
    expect(JSON.parse(relay.joinEnv(1)[JOIN_ENV]!)).toEqual({ carry: null, switched: carry.to });
    expect(JSON.parse(relay.joinEnv(0)[JOIN_ENV]!)).toEqual({ carry: null, switched: carry.to });
  });
});

describe('credentials stay in each process (sign-ins.ts)', () => {
  function configWith(auth: RespoolConfig['upstreamAuth'], migrationAuth?: RespoolConfig['upstreamAuth']): RespoolConfig {
    const config = structuredClone(DEFAULT_CONFIG) as RespoolConfig;
    config.upstreamAuth = auth;
    if (migrationAuth !== undefined) config.migration.upstreamAuth = migrationAuth;
    return config;
  }

  it('a place told to another process holds no credential; each process signs in with its own config\'s', () => {
    const config = configWith({ username: 'proxy', password: 'source-secret' }, { username: null, password: 'target-secret' });
    const signIns = new SignIns(config);
    const target = signIns.at({ seeds: [{ host: '10.0.0.2', port: 6379 }], mode: 'auto', signIn: 'migration' });
    expect(target.upstreamAuth).toEqual({ username: null, password: 'target-secret' });
    const told = JSON.stringify({ op: 'carry', from: placeOf(signIns.at({ seeds: [{ host: '10.0.0.1', port: 6379 }], mode: 'auto', signIn: 'upstreams' })), to: placeOf(target) });
    expect(told).not.toMatch(/secret|upstreamAuth|upstreamTls/);
    // Another process with other credentials for the same places signs in with its own.
    const other = new SignIns(configWith({ username: 'proxy', password: 'its-own' }));
    expect(other.at(JSON.parse(told).to).upstreamAuth).toEqual({ username: 'proxy', password: 'its-own' }); // no migration block: the upstreams'
    expect(other.at(JSON.parse(told).from).upstreamAuth).toEqual({ username: 'proxy', password: 'its-own' });
  });

  it('the upstreams\' credentials are those the process started with, after a cutover replaced them in the config', () => {
    const config = configWith({ username: null, password: 'source-secret' }, null);
    const signIns = new SignIns(config);
    config.upstreamAuth = null; // a cutover to a target without AUTH (upstream-switch.ts)
    signIns.current = 'migration';
    expect(signIns.at({ seeds: [{ host: '10.0.0.1', port: 6379 }], mode: 'auto', signIn: 'upstreams' }).upstreamAuth).toEqual({ username: null, password: 'source-secret' });
    expect(signIns.at({ seeds: [{ host: '10.0.0.2', port: 6379 }], mode: 'auto', signIn: 'migration' }).upstreamAuth).toBe(null);
  });
});

describe('the keys a paused migration keeps to copy', () => {
  it('past a million, the list is dropped and every key will be compared before synced', () => {
    const config = structuredClone(DEFAULT_CONFIG) as RespoolConfig;
    const migration = new Migration({
      config,
      signIns: new SignIns(config),
      record: null,
      log: pino({ level: 'silent' }),
      refresher: {} as never,
      dedicated: {} as never,
      clientPause: { holdWrites: () => {} },
      isWrite: () => true,
      writesBefore: async () => {},
      members: null,
      confirmCopies: false,
      clientLatency: null,
    });
    // A paused migration (its target down): writes are listed, not copied.
    const inside = migration as unknown as { phase: string; copier: { counts: { mirrored: number } }; compareAll: boolean };
    inside.phase = 'paused';
    inside.copier = { counts: { mirrored: 0 } };
    for (let i = 0; i < 1_000_000; i++) migration.written(0, [Buffer.from(`k${i}`)]);
    expect(migration.status()['dirty']).toBe(1_000_000);
    expect(inside.compareAll).toBe(false);
    migration.written(0, [Buffer.from('one-more')]);
    expect(migration.status()['dirty']).toBe(1);
    expect(inside.compareAll).toBe(true);
    expect(inside.copier.counts.mirrored).toBe(1_000_001);
    migration.close();
  });
});
