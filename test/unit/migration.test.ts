/**
 * The live migration's parts that need no server (src/migration): one copy of a key at a time and
 * the copy that follows a write, what a copy sends, the verifier's comparison, the source's write
 * count, START's address, and the cutover's write hold against a client's CLIENT UNPAUSE.
 */
import { describe, expect, it } from 'vitest';
import { CARRY_GATHER_MS, KeyCopier } from '../../src/migration/key-copier.js';
import { sameOnBothSides } from '../../src/migration/key-compare.js';
import { writeCalls } from '../../src/migration/write-rates.js';
import { NodeError, type MigrationSide } from '../../src/migration/migration-side.js';
import { parseAddress } from '../../src/handlers/respool-migrate.js';
import { ClientPause } from '../../src/client/client-pause.js';
import type { RespValue } from '../../src/resp/decode.js';

type Call = Array<string | Buffer | number>;

/** A side answering from a function, recording each call (commands as text). */
function fakeSide(answer: (args: Call) => RespValue | Promise<RespValue>): { side: MigrationSide; calls: string[][] } {
  const calls: string[][] = [];
  const side = {
    callFor: async (_key: Buffer, _db: number, args: Call) => {
      calls.push(args.map((a) => (Buffer.isBuffer(a) ? a.toString('latin1') : String(a))));
      const reply = await answer(args);
      if (reply instanceof Error) throw reply;
      return reply;
    },
  } as unknown as MigrationSide;
  return { side, calls };
}

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

describe('KeyCopier', () => {
  it('copies DUMP + PTTL as RESTORE … REPLACE ABSTTL, and a key gone from the source as DEL', async () => {
    const values = new Map<string, Buffer>([['a', Buffer.from('payload-a')]]);
    const source = fakeSide((args) => {
      const key = (args[1] as Buffer).toString();
      if (args[0] === 'DUMP') return values.get(key) ?? null;
      return key === 'a' ? 5_000 : -2;
    });
    const target = fakeSide(() => 'OK');
    const copier = new KeyCopier(source.side, target.side, () => {});
    const before = Date.now();
    await copier.copy(0, Buffer.from('a'), 'scan');
    await copier.copy(0, Buffer.from('gone'), 'scan');
    const restore = target.calls[0]!;
    expect(restore.slice(0, 2)).toEqual(['RESTORE', 'a']);
    expect(Number(restore[2])).toBeGreaterThanOrEqual(before + 5_000);
    expect(Number(restore[2])).toBeLessThan(Date.now() + 5_001);
    expect(restore.slice(3)).toEqual(['payload-a', 'REPLACE', 'ABSTTL']);
    expect(target.calls[1]).toEqual(['DEL', 'gone']);
    expect(copier.counts).toMatchObject({ copied: 2, deleted: 1, bytes: 'payload-a'.length, mirrored: 0, recopied: 0 });
  });

  it('a key without expiry is restored with TTL 0', async () => {
    const target = fakeSide(() => 'OK');
    const copier = new KeyCopier(fakeSide((args) => (args[0] === 'DUMP' ? Buffer.from('p') : -1)).side, target.side, () => {});
    await copier.copy(0, Buffer.from('k'), 'scan');
    expect(target.calls[0]).toEqual(['RESTORE', 'k', '0', 'p', 'REPLACE']);
    expect(copier.inFlight).toBe(0);
  });

  it('copies of one key never overlap: writes during a copy make one more copy, after it, whose DUMP follows them', async () => {
    let value = 'v1';
    const gate = deferred();
    let dumps = 0;
    const source = fakeSide(async (args) => {
      if (args[0] === 'PTTL') return -1;
      dumps++;
      const now = value; // the DUMP reads the source when it runs
      if (dumps === 1) await gate.promise;
      return Buffer.from(now);
    });
    const target = fakeSide(() => 'OK');
    const copier = new KeyCopier(source.side, target.side, () => {});
    const key = Buffer.from('k');
    const first = copier.copy(0, key, 'scan');
    await new Promise((r) => setImmediate(r));
    value = 'v2';
    copier.carry(0, key);
    value = 'v3';
    copier.carry(0, key);
    expect(copier.inFlight).toBe(2); // the scan's copy, and the written key (once) gathered
    await new Promise((r) => setTimeout(r, CARRY_GATHER_MS + 10));
    expect(copier.inFlight).toBe(1); // the carried copy waits for the running one
    gate.resolve();
    await first;
    await copier.idle();
    // Two copies, not three: the writes during the first share the one after it, which read v3.
    expect(target.calls.map((c) => c[3])).toEqual(['v1', 'v3']);
    expect(copier.counts).toMatchObject({ copied: 1, mirrored: 2, recopied: 1 });
    expect(copier.inFlight).toBe(0);
    await copier.idle();
  });

  it('written keys are gathered and copied together: one DUMP each, sent before any reply; idle() starts them at once; stop() drops them', async () => {
    const gate = deferred();
    const source = fakeSide(async (args) => {
      if (args[0] === 'PTTL') return -1;
      await gate.promise;
      return Buffer.from(`v-${String(args[1])}`);
    });
    const target = fakeSide(() => 'OK');
    const copier = new KeyCopier(source.side, target.side, () => {});
    for (const k of ['a', 'b', 'a', 'c']) copier.carry(0, Buffer.from(k));
    expect(copier.inFlight).toBe(3);
    expect(source.calls).toEqual([]); // gathered, not sent yet
    const idle = copier.idle(); // a cutover's drain does not wait for the timer
    expect(source.calls.filter((c) => c[0] === 'DUMP').map((c) => c[1])).toEqual(['a', 'b', 'c']);
    gate.resolve();
    await idle;
    expect(target.calls.map((c) => c[1]).sort()).toEqual(['a', 'b', 'c']);
    expect(copier.counts).toMatchObject({ mirrored: 4, recopied: 3, copied: 0 });
    copier.carry(0, Buffer.from('e'));
    copier.flush(); // a cutover's drain: started now, not at the timer
    expect(source.calls.filter((c) => c[0] === 'DUMP').map((c) => c[1])).toContain('e');
    await copier.idle();
    copier.carry(0, Buffer.from('d'));
    await copier.stop();
    await new Promise((r) => setTimeout(r, CARRY_GATHER_MS + 10));
    expect(source.calls.some((c) => c[1] === 'd')).toBe(false);
    expect(copier.inFlight).toBe(0);
  });

  it('a failed copy is reported (the migration pauses and keeps the key) and rejects its waiters', async () => {
    const failures: string[] = [];
    const source = fakeSide((args) => (args[0] === 'DUMP' ? Buffer.from('p') : -1));
    const target = fakeSide(() => new NodeError('OOM command not allowed'));
    const copier = new KeyCopier(source.side, target.side, (_db, key, err) => failures.push(`${key}: ${err.message}`));
    await expect(copier.copy(2, Buffer.from('k'), 'write')).rejects.toThrow('OOM');
    expect(failures).toEqual(['k: OOM command not allowed']);
    expect(copier.inFlight).toBe(0);
  });

  it('settled() waits for the copy running now, not for later ones', async () => {
    const gate = deferred();
    const source = fakeSide(async (args) => {
      if (args[0] === 'PTTL') return -1;
      await gate.promise;
      return Buffer.from('p');
    });
    const copier = new KeyCopier(source.side, fakeSide(() => 'OK').side, () => {});
    void copier.copy(0, Buffer.from('k'), 'scan');
    let settled = false;
    const waiting = copier.settled(0, Buffer.from('k')).then(() => (settled = true));
    await new Promise((r) => setImmediate(r));
    expect(settled).toBe(false);
    gate.resolve();
    await waiting;
    expect(settled).toBe(true);
    await expect(copier.settled(0, Buffer.from('other'))).resolves.toBeUndefined();
  });
});

describe('sameOnBothSides', () => {
  const side = (values: Record<string, RespValue>) => fakeSide((args) => values[String(args[0])] ?? null).side;

  it('equal DUMP payloads and expiries within 1 s are the same', async () => {
    const a = side({ PTTL: 10_000, DUMP: Buffer.from('x') });
    const b = side({ PTTL: 9_400, DUMP: Buffer.from('x') });
    expect(await sameOnBothSides(a, b, 0, Buffer.from('k'))).toBe(true);
  });

  it('expiries more than 1 s apart, or one key without expiry, differ', async () => {
    expect(await sameOnBothSides(side({ PTTL: 10_000, DUMP: Buffer.from('x') }), side({ PTTL: 8_000, DUMP: Buffer.from('x') }), 0, Buffer.from('k'))).toBe(false);
    expect(await sameOnBothSides(side({ PTTL: -1, DUMP: Buffer.from('x') }), side({ PTTL: 8_000, DUMP: Buffer.from('x') }), 0, Buffer.from('k'))).toBe(false);
  });

  it('another server\'s format: the same set read in another order is the same; another member is not', async () => {
    const members = (list: string[]) => list.map((m) => Buffer.from(m));
    const a = side({ PTTL: -1, DUMP: Buffer.from('redis7'), TYPE: 'set', SMEMBERS: members(['a', 'b', 'c']) });
    expect(await sameOnBothSides(a, side({ PTTL: -1, DUMP: Buffer.from('valkey8'), TYPE: 'set', SMEMBERS: members(['c', 'a', 'b']) }), 0, Buffer.from('s'))).toBe(true);
    expect(await sameOnBothSides(a, side({ PTTL: -1, DUMP: Buffer.from('valkey8'), TYPE: 'set', SMEMBERS: members(['a', 'b', 'd']) }), 0, Buffer.from('s'))).toBe(false);
  });

  it('a hash compares field by field whatever the order; another type differs', async () => {
    const h = (pairs: string[]) => pairs.map((p) => Buffer.from(p));
    const a = side({ PTTL: -1, DUMP: Buffer.from('1'), TYPE: 'hash', HGETALL: h(['f', '1', 'g', '2']) });
    expect(await sameOnBothSides(a, side({ PTTL: -1, DUMP: Buffer.from('2'), TYPE: 'hash', HGETALL: h(['g', '2', 'f', '1']) }), 0, Buffer.from('h'))).toBe(true);
    expect(await sameOnBothSides(a, side({ PTTL: -1, DUMP: Buffer.from('2'), TYPE: 'hash', HGETALL: h(['g', '2', 'f', '9']) }), 0, Buffer.from('h'))).toBe(false);
    expect(await sameOnBothSides(a, side({ PTTL: -1, DUMP: Buffer.from('2'), TYPE: 'string', GET: Buffer.from('x') }), 0, Buffer.from('h'))).toBe(false);
  });

  it('sorted-set scores compare as numbers (Redis 7.0 writes 0.1 as 0.10000000000000001)', async () => {
    const z = (score: string) => [Buffer.from('a'), Buffer.from(score)];
    const redis7 = side({ PTTL: -1, DUMP: Buffer.from('redis7'), TYPE: 'zset', ZRANGE: z('0.10000000000000001') });
    expect(await sameOnBothSides(redis7, side({ PTTL: -1, DUMP: Buffer.from('valkey8'), TYPE: 'zset', ZRANGE: z('0.1') }), 0, Buffer.from('z'))).toBe(true);
    expect(await sameOnBothSides(redis7, side({ PTTL: -1, DUMP: Buffer.from('valkey8'), TYPE: 'zset', ZRANGE: z('0.2') }), 0, Buffer.from('z'))).toBe(false);
  });

  it('a key gone on both sides is the same', async () => {
    expect(await sameOnBothSides(side({ PTTL: -2 }), side({ PTTL: -2 }), 0, Buffer.from('k'))).toBe(true);
  });
});

describe('the source\'s write count', () => {
  it('sums the calls of write commands in INFO commandstats, subcommands included', () => {
    const info = '# Commandstats\r\ncmdstat_set:calls=10,usec=5\r\ncmdstat_get:calls=99,usec=1\r\ncmdstat_incr:calls=3,usec=1\r\ncmdstat_config|set:calls=2,usec=1\r\n';
    const writes = new Set(['set', 'incr']);
    expect(writeCalls(info, (c) => writes.has(c))).toBe(13);
  });
});

describe('RESPOOL MIGRATE START\'s address', () => {
  it('host:port and [v6]:port; anything else is refused', () => {
    expect(parseAddress('127.0.0.1:6380')).toEqual({ host: '127.0.0.1', port: 6380 });
    expect(parseAddress('[::1]:7000')).toEqual({ host: '::1', port: 7000 });
    expect(parseAddress('valkey.internal:6379')).toEqual({ host: 'valkey.internal', port: 6379 });
    expect(parseAddress('127.0.0.1')).toBeNull();
    expect(parseAddress('127.0.0.1:0')).toBeNull();
    expect(parseAddress('127.0.0.1:70000')).toBeNull();
  });
});

describe('the cutover\'s write hold', () => {
  it('holds writes until released, whatever a client\'s CLIENT PAUSE or UNPAUSE does meanwhile', () => {
    const pause = new ClientPause();
    const resumed: string[] = [];
    pause.holdWrites(true);
    expect(pause.active).toBe(true);
    expect(pause.all).toBe(false); // reads flow
    pause.hold({ resumeAfterPause: () => resumed.push('held') });
    pause.unpause(); // a client's CLIENT UNPAUSE
    expect(pause.active).toBe(true);
    pause.pause(1, true);
    pause.unpause();
    expect(pause.active).toBe(true);
    expect(pause.all).toBe(false);
    pause.holdWrites(false);
    expect(pause.active).toBe(false);
    expect(resumed.length).toBeGreaterThanOrEqual(1);
  });

  it('a client\'s pause in force stays in force when the hold ends', () => {
    const pause = new ClientPause();
    pause.pause(10_000, false);
    pause.holdWrites(true);
    pause.holdWrites(false);
    expect(pause.active).toBe(true);
    pause.unpause();
    expect(pause.active).toBe(false);
  });
});
