/**
 * Confirmed copies (src/migration/key-copier.ts, `confirm`): several workers, each with a
 * KeyCopier and sides of its own, copy the same keys at the same time while clients write them,
 * each copy triggered by a write the source acknowledged (as a worker carries its clients' writes).
 * When every copy has ended, every key holds on the target what it holds on the source: the same
 * DUMP payload and the same PEXPIRETIME (or it is gone on both). For a key copied in parts, and
 * for a hash, the value may instead be the same type and whole value (one rebuilt by HSET, RPUSH…,
 * or a hashtable RESTOREd, need not DUMP as the source's: see compareSides); the expiry is the same
 * to the millisecond all the same (copy-in-parts.ts sets the PEXPIRETIME the source answered, as
 * RESTORE … ABSTTL does). No copy fails: with small keys but for KeyKeptChanging (a key written all
 * along, left to a later copy, by design), with big keys not at all.
 *
 *   - small keys (strings, INCR counters, hashes, lists; DEL, PEXPIRE, PERSIST), each copy one
 *     RESTORE … REPLACE ABSTTL (or DEL), onto a standalone target and onto a 3-primary cluster;
 *   - big keys (~20 KB strings, hashes and lists, maxPayloadBytes 2048) copied in parts under a
 *     temporary name and RENAMEd over the key (or the key DELeted, when the source lost it during
 *     the reads), mixed with small writes and DELs of the same keys: no temporary key is left on
 *     the target;
 *   - interleavings set up by hand: a copy's RESTORE, or RENAME, held until another worker's copy
 *     of a later write has landed (confirmed, the later write wins; unconfirmed, it is lost); and a
 *     copy in parts whose first read of the value (GETRANGE, HSCAN, LRANGE) is held while the key
 *     is DELeted on the source (nothing is built: the copy ends with the key gone on the target).
 *
 * The workers are simulated in this one process: three KeyCopier instances, each with sides of its
 * own. A copy in parts names its temporary key with a random suffix per copy (copy-in-parts.ts,
 * partsName()), so copies of one key by several workers — in one process or in many — build under
 * names apart and never into each other's.
 */
import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { Cluster, Valkey } from 'iovalkey';
import { DEFAULT_CONFIG } from '../../src/config/defaults.js';
import type { RespoolConfig } from '../../src/config/types.js';
import { KeyCopier, KeyKeptChanging } from '../../src/migration/key-copier.js';
import { MigrationSide, type SideAddress } from '../../src/migration/migration-side.js';
import { startCluster, startStandalone, type ValkeyNode } from '../harness/valkey-processes.js';
import { scanKeys } from '../helpers/migration.js';
import { seededRandom } from '../helpers/test-data.js';

/* ------------------------------------------------------------------------------------------------
 * What each test started, ended after it
 * --------------------------------------------------------------------------------------------- */

const toEnd: Array<() => unknown> = [];

afterEach(async () => {
  for (const end of toEnd.splice(0).reverse()) {
    try {
      await end();
    } catch {
      // ended as far as it could be
    }
  }
});

const PART_MARK = ':respool-migration-part:';
const log = pino({ level: process.env['RESPOOL_TEST_LOG'] ?? 'silent' });

function testConfig(): RespoolConfig {
  return structuredClone(DEFAULT_CONFIG) as RespoolConfig;
}

function addressOf(nodes: Array<{ host: string; port: number }>): SideAddress {
  const config = testConfig();
  return { seeds: nodes.map((n) => ({ host: n.host, port: n.port })), mode: 'auto', signIn: 'upstreams', upstreamAuth: config.upstreamAuth, upstreamTls: config.upstreamTls };
}

/* ------------------------------------------------------------------------------------------------
 * Simulated workers
 * --------------------------------------------------------------------------------------------- */

interface Worker {
  id: number;
  source: MigrationSide;
  target: MigrationSide;
  copier: KeyCopier;
  /** onFailure's reports: key and message. */
  failures: Array<{ key: string; error: Error }>;
  /** What the copier put on the target: RESTOREs, RENAMEs and DELs of the key (a confirmed copy that had to go again puts more than once). */
  puts: number;
}

/** `n` workers, each with sides (pools, topology) and a copier of its own, as worker processes have. */
async function startWorkers(n: number, source: SideAddress, target: SideAddress, maxPayloadBytes: number, confirm: boolean): Promise<Worker[]> {
  const workers: Worker[] = [];
  for (let id = 0; id < n; id++) {
    const config = testConfig();
    const from = new MigrationSide('source', source, config, log);
    const to = new MigrationSide('target', target, config, log);
    toEnd.push(() => {
      from.close();
      to.close();
    });
    const failures: Worker['failures'] = [];
    const copier = new KeyCopier(from, to, (_db, key, error) => failures.push({ key: key.toString('latin1'), error }), maxPayloadBytes, confirm);
    const w: Worker = { id, source: from, target: to, copier, failures, puts: 0 };
    const call = to.callFor.bind(to);
    to.callFor = (key, db, args) => {
      const command = String(args[0]).toUpperCase();
      if (command === 'RESTORE' || command === 'RENAME' || (command === 'DEL' && Buffer.from(args[1] as Buffer | string).equals(key))) w.puts++;
      return call(key, db, args);
    };
    workers.push(w);
  }
  for (const w of workers) {
    const [a, b] = await Promise.all([w.source.discover(), w.target.discover()]);
    if (a !== null || b !== null) throw new Error(`worker ${w.id} could not discover its sides: ${a ?? ''} ${b ?? ''}`);
  }
  return workers;
}

/** A copy of the key by the worker. */
function copyOn(w: Worker, key: string, reason: 'scan' | 'write' = 'write'): Promise<void> {
  return w.copier.copy(0, Buffer.from(key, 'latin1'), reason);
}

/* ------------------------------------------------------------------------------------------------
 * Reading both sides
 * --------------------------------------------------------------------------------------------- */

interface Reader {
  dumpBuffer(key: string): Promise<Buffer | null>;
  call(...args: Array<string | number>): Promise<unknown>;
  type(key: string): Promise<string>;
}

interface Side {
  reader: Reader;
  /** Every key of every primary (by SCAN on each). */
  keys(): Promise<string[]>;
}

function directClient(node: { host: string; port: number }): Valkey {
  const c = new Valkey({ host: node.host, port: node.port, maxRetriesPerRequest: 0, lazyConnect: false });
  c.on('error', () => undefined);
  toEnd.push(() => c.disconnect());
  return c;
}

function standaloneSide(node: ValkeyNode): Side {
  const c = directClient(node);
  return { reader: c, keys: () => scanKeys(c) };
}

function clusterSide(primaries: ValkeyNode[]): Side {
  const cluster = new Cluster(
    primaries.map((p) => ({ host: p.host, port: p.port })),
    { redisOptions: { maxRetriesPerRequest: 0 }, enableOfflineQueue: true },
  );
  cluster.on('error', () => undefined);
  toEnd.push(() => cluster.disconnect());
  const perNode = primaries.map((p) => directClient(p));
  return { reader: cluster, keys: async () => (await Promise.all(perNode.map((c) => scanKeys(c)))).flat().sort() };
}

/** What a key holds, for a message: its type and a short account of its value. */
async function describeKey(r: Reader, key: string): Promise<string> {
  const type = await r.type(key);
  const at = Number(await r.call('PEXPIRETIME', key));
  let value = '';
  if (type === 'string') {
    const v = String(await r.call('GET', key));
    value = v.length > 40 ? `${v.length} bytes ${v.slice(0, 16)}…${v.slice(-16)}` : JSON.stringify(v);
  } else if (type === 'hash') {
    const flat = (await r.call('HGETALL', key)) as string[];
    const pairs: string[] = [];
    for (let i = 0; i + 1 < flat.length; i += 2) pairs.push(`${flat[i]}=${flat[i + 1]!.length > 12 ? `${flat[i + 1]!.slice(0, 12)}…` : flat[i + 1]}`);
    value = `{${pairs.sort().join(' ')}}`;
  } else if (type === 'list') {
    const items = (await r.call('LRANGE', key, 0, -1)) as string[];
    value = `[${items.length}: …${items.slice(-4).map((s) => (s.length > 12 ? `${s.slice(0, 12)}…` : s)).join(',')}]`;
  }
  return `${type} ${value} expireAt ${at}`;
}

/** A key's whole value as both servers answer it alike: its type, and its value (a hash's fields sorted). */
async function wholeValue(r: Reader, key: string): Promise<string> {
  const type = await r.type(key);
  if (type === 'string') return `string ${String(await r.call('GET', key))}`;
  if (type === 'list') return `list ${JSON.stringify(await r.call('LRANGE', key, 0, -1))}`;
  if (type === 'hash') {
    const flat = (await r.call('HGETALL', key)) as string[];
    const pairs: Array<[string, string]> = [];
    for (let i = 0; i + 1 < flat.length; i += 2) pairs.push([flat[i]!, flat[i + 1]!]);
    return `hash ${JSON.stringify(pairs.sort((x, y) => (x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : 0)))}`;
  }
  return type;
}

interface Compared {
  /** Keys that differ: each with what both sides hold. */
  diffs: string[];
  /** Keys that hold the same value but DUMP otherwise on the target, by type and how copied ('hash restored', 'list in parts'…). */
  otherDump: Record<string, number>;
}

/**
 * Keys whose value or PEXPIRETIME differ between the sides (or that one side has and the other
 * not), each with what both sides hold. Expiries must be equal to the millisecond, for every key.
 * A value is the same when the DUMP payloads are equal, or else when its type and whole value are,
 * for the keys whose DUMP the same value need not reproduce:
 *   - a key whose payload is over `parts` (its last copy went in parts): it is rebuilt on the
 *     target by HSET, RPUSH… of what the source's reads gave, not restored from the source's
 *     bytes — a hash's fields inserted in the order HSCAN gave them, a list's items packed into
 *     nodes as RPUSH's batches fill them — so it need not be encoded, and DUMPed, as the source's;
 *   - a hash, however copied: a hashtable (a hash with a field over hash-max-listpack-value) DUMPs
 *     its fields in its table's order, and RESTORE builds the table anew, so the same fields may
 *     DUMP in another order (Valkey 8.0: a 40-field hash cut to 3 DUMPs otherwise once RESTOREd).
 * Every other key (small strings, counters, lists, listpack hashes restored) must DUMP the same.
 */
async function compareSides(source: Side, target: Side, keys: readonly string[], parts = Number.POSITIVE_INFINITY): Promise<Compared> {
  const out: Compared = { diffs: [], otherDump: {} };
  for (const key of keys) {
    const [dumpA, atA, dumpB, atB] = await Promise.all([source.reader.dumpBuffer(key), source.reader.call('PEXPIRETIME', key), target.reader.dumpBuffer(key), target.reader.call('PEXPIRETIME', key)]);
    let sameValue = dumpA === null || dumpB === null ? dumpA === dumpB : dumpA.equals(dumpB);
    if (!sameValue && dumpA !== null && dumpB !== null) {
      const type = await source.reader.type(key);
      const inParts = dumpA.length > parts;
      if ((inParts || type === 'hash') && (await wholeValue(source.reader, key)) === (await wholeValue(target.reader, key))) {
        sameValue = true;
        const how = `${type} ${inParts ? 'in parts' : 'restored'}`;
        out.otherDump[how] = (out.otherDump[how] ?? 0) + 1;
      }
    }
    const sameExpiry = Number(atA) === Number(atB);
    if (sameValue && sameExpiry) continue;
    out.diffs.push(`${key}: source ${await describeKey(source.reader, key)} | target ${await describeKey(target.reader, key)}${sameValue ? ' (same value)' : ''}`);
  }
  return out;
}

/* ------------------------------------------------------------------------------------------------
 * Writers
 * --------------------------------------------------------------------------------------------- */

const KINDS = ['str', 'ctr', 'hash', 'list'] as const;
type Kind = (typeof KINDS)[number];
const KEYS_PER_KIND = 50;
/** Keys 0..HOT-1 of each kind get HOT_SHARE of the writes: many writes, and copies, of one key at once. */
const HOT = 3;
const HOT_SHARE = 0.3;

function keysOf(prefix: string): string[] {
  return KINDS.flatMap((kind) => Array.from({ length: KEYS_PER_KIND }, (_, i) => `${prefix}${kind}:${i}`));
}

/** Random text of `bytes` bytes (base64 of random bytes: LZF cannot make its DUMP small). */
function bigText(bytes: number): string {
  return randomBytes(Math.ceil((bytes * 3) / 4)).toString('base64').slice(0, bytes);
}

interface Plan {
  prefix: string;
  /** Values of ~20 KB (strings, hash fields × 40, list items × 40) besides small ones. */
  big: boolean;
}

/** One write to a key of the plan's keyspace through `c`, acknowledged; the key it wrote, and whether it was a DEL. */
async function writeOnce(c: Valkey, plan: Plan, rand: () => number, n: number): Promise<{ key: string; del: boolean }> {
  const int = (k: number) => Math.floor(rand() * k);
  const kind: Kind = KINDS[int(KINDS.length)]!;
  const key = `${plan.prefix}${kind}:${rand() < HOT_SHARE ? int(HOT) : int(KEYS_PER_KIND)}`;
  const r = rand();
  if (r < 0.06) {
    await c.del(key);
    return { key, del: true };
  }
  if (r < 0.14) {
    await c.pexpire(key, 100_000 + int(100_000)); // long: no key expires during the test
  } else if (r < 0.17) {
    await c.persist(key);
  } else if (kind === 'str') {
    const value = plan.big && rand() < 0.7 ? `${n}:${bigText(18_000 + int(4_000))}` : `v${n}-${int(1e9)}`;
    if (plan.big && rand() < 0.15) await c.append(key, `+${n}`);
    else if (rand() < 0.25) await c.set(key, value, 'PX', 100_000 + int(100_000));
    else await c.set(key, value); // drops the expiry
  } else if (kind === 'ctr') {
    await c.incr(key);
  } else if (kind === 'hash') {
    await c.hset(key, `f${int(plan.big ? 40 : 8)}`, plan.big ? `${n}:${bigText(500)}` : `h${n}`);
  } else if (rand() < 0.15) {
    await c.ltrim(key, plan.big ? -40 : -20, -1);
  } else {
    await c.rpush(key, plan.big ? `${n}:${bigText(500)}` : `i${n}`);
  }
  return { key, del: false };
}

/** Every key of the plan on the source with a value (big ones, ~20 KB, for a big plan). */
async function seed(c: Valkey, plan: Plan): Promise<void> {
  const pipe = c.pipeline();
  for (let i = 0; i < KEYS_PER_KIND; i++) {
    pipe.set(`${plan.prefix}str:${i}`, plan.big ? bigText(20_000) : `s${i}`);
    pipe.set(`${plan.prefix}ctr:${i}`, i);
    const fields: string[] = [];
    for (let f = 0; f < (plan.big ? 40 : 8); f++) fields.push(`f${f}`, plan.big ? bigText(500) : `h${f}`);
    pipe.hset(`${plan.prefix}hash:${i}`, ...fields);
    pipe.rpush(`${plan.prefix}list:${i}`, ...Array.from({ length: plan.big ? 40 : 10 }, (_, j) => (plan.big ? bigText(500) : `i${j}`)));
    if (i % 4 === 0) pipe.pexpire(`${plan.prefix}hash:${i}`, 150_000);
  }
  const replies = (await pipe.exec())!;
  for (const [err] of replies) if (err !== null) throw err;
}

interface RunResult {
  writes: number;
  copies: number;
  /** Copies asked of all the workers at once (the same key, at the same moment). */
  overlapped: number;
  rejected: number;
  /** Puts beyond one per copy: copies a confirming read sent round again. */
  confirmedAgain: number;
  /** Keys DELeted on the source at some point. */
  deleted: Set<string>;
  counts: string;
}

/**
 * Writers write the source for `ms`; after each acknowledged write, a copy of its key by a random
 * worker — or, every other 250 ms (and now and then besides), by every worker at once. Then every
 * copy is awaited and every copier is idle.
 */
async function writeAndCopy(sourceNode: ValkeyNode, workers: Worker[], plan: Plan, ms: number, writers: number): Promise<RunResult> {
  const pending: Array<Promise<void>> = [];
  const result: RunResult = { writes: 0, copies: 0, overlapped: 0, rejected: 0, confirmedAgain: 0, deleted: new Set(), counts: '' };
  const pick = seededRandom(99);
  const began = Date.now();
  const overlapNow = () => Math.floor((Date.now() - began) / 250) % 2 === 1 || pick() < 0.1;
  const ask = (w: Worker, key: string) => {
    result.copies++;
    pending.push(copyOn(w, key).catch(() => void result.rejected++)); // onFailure has it too
  };
  const loops = Array.from({ length: writers }, async (_, id) => {
    const c = directClient(sourceNode);
    const rand = seededRandom(7 + id);
    let n = id * 1_000_000;
    while (Date.now() - began < ms) {
      const { key, del } = await writeOnce(c, plan, rand, n++);
      if (del) result.deleted.add(key);
      result.writes++;
      if (overlapNow()) {
        result.overlapped++;
        for (const w of workers) ask(w, key);
      } else {
        ask(workers[Math.floor(pick() * workers.length)]!, key);
      }
      if (n % 20 === 0) await new Promise((r) => setImmediate(r)); // the copies' replies get their turn
    }
  });
  await Promise.all(loops);
  const settled = (async () => {
    await Promise.all(pending);
    await Promise.all(workers.map((w) => w.copier.idle()));
  })();
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`copies still running 40 s after the writes ended: ${workers.map((w) => w.copier.inFlight).join(', ')} in flight`)), 40_000);
  });
  try {
    await Promise.race([settled, timedOut]);
  } finally {
    clearTimeout(timer);
  }
  result.counts = workers.map((w) => `w${w.id} ${JSON.stringify(w.copier.counts)} puts ${w.puts}`).join('; ');
  // Each copy (one per scan copy, one per `recopied`) puts once, and once more each time its confirming read found the source changed.
  result.confirmedAgain = workers.reduce((n, w) => n + w.puts - w.copier.counts.recopied - (w.id === 0 ? KINDS.length * KEYS_PER_KIND : 0), 0);
  return result;
}

/* ------------------------------------------------------------------------------------------------
 * The tests
 * --------------------------------------------------------------------------------------------- */

interface Setup {
  source: ValkeyNode;
  sourceSide: Side;
  targetSide: Side;
  sourceAddress: SideAddress;
  targetAddress: SideAddress;
}

async function standaloneTarget(): Promise<Setup> {
  const [source, target] = await Promise.all([startStandalone(), startStandalone()]);
  toEnd.push(() => source.stop(), () => target.stop());
  return { source, sourceSide: standaloneSide(source), targetSide: standaloneSide(target), sourceAddress: addressOf([source]), targetAddress: addressOf([target]) };
}

async function clusterTarget(): Promise<Setup> {
  const [source, cluster] = await Promise.all([startStandalone(), startCluster({ primaries: 3, replicasPerPrimary: 0 })]);
  toEnd.push(() => source.stop(), () => cluster.stop());
  const primaries = await cluster.primaries();
  return { source, sourceSide: standaloneSide(source), targetSide: clusterSide(primaries), sourceAddress: addressOf([source]), targetAddress: addressOf(primaries) };
}

const TARGETS: Array<[string, () => Promise<Setup>]> = [
  ['a standalone target', standaloneTarget],
  ['a 3-primary cluster target', clusterTarget],
];

/**
 * The failures the copiers reported, split: KeyKeptChanging (a key written all along, left to a
 * later copy: what a confirmed copy may end with by design) counted, and every other listed.
 */
function failuresOf(workers: Worker[]): { unexpected: string[]; keptChanging: number } {
  const out = { unexpected: [] as string[], keptChanging: 0 };
  for (const w of workers) {
    for (const f of w.failures) {
      if (f.error instanceof KeyKeptChanging) out.keptChanging++;
      else out.unexpected.push(`w${w.id} ${f.key}: ${f.error.message}`);
    }
  }
  return out;
}

async function leftoverParts(side: Side): Promise<string[]> {
  return (await side.keys()).filter((k) => k.includes(PART_MARK));
}

describe('migration: confirmed copies by several workers at once', () => {
  for (const [name, setUp] of TARGETS) {
    describe(name, () => {
      it('three workers copying the same small keys while they are written: every key the same on both sides', async () => {
        const s = await setUp();
        const plan: Plan = { prefix: 'cf:', big: false };
        await seed(directClient(s.source), plan);
        const workers = await startWorkers(3, s.sourceAddress, s.targetAddress, Number.POSITIVE_INFINITY, true);
        const keys = keysOf(plan.prefix);
        await Promise.all(keys.map((k) => copyOn(workers[0]!, k, 'scan'))); // the scan's copy of each key

        const run = await writeAndCopy(s.source, workers, plan, 3_000, 6);
        const { diffs } = await compareSides(s.sourceSide, s.targetSide, keys);
        const extra = (await s.targetSide.keys()).filter((k) => !keys.includes(k));
        const failures = failuresOf(workers);
        console.log(`[${name}, small] ${run.writes} writes, ${run.copies} copies (${run.overlapped} writes copied by all 3 at once), ${run.rejected} rejected (${failures.keptChanging} KeyKeptChanging), ${run.confirmedAgain} puts again after a confirming read; ${run.counts}`);

        expect(run.writes).toBeGreaterThan(1_000);
        expect(run.overlapped).toBeGreaterThan(100);
        expect(run.confirmedAgain).toBeGreaterThan(0); // confirming reads did find keys changed, and copied them again
        expect(diffs).toEqual([]);
        expect(extra).toEqual([]);
        expect(failures.unexpected).toEqual([]);
      }, 60_000);

      it('three workers copying the same big keys in parts (RENAME) while they are written: every key the same, no temporary key left', async () => {
        const s = await setUp();
        const plan: Plan = { prefix: 'cp:', big: true };
        await seed(directClient(s.source), plan);
        const workers = await startWorkers(3, s.sourceAddress, s.targetAddress, 2_048, true);
        const keys = keysOf(plan.prefix);
        await Promise.all(keys.map((k) => copyOn(workers[0]!, k, 'scan')));

        const run = await writeAndCopy(s.source, workers, plan, 3_000, 6);
        const { diffs, otherDump } = await compareSides(s.sourceSide, s.targetSide, keys, 2_048);
        const leftovers = await leftoverParts(s.targetSide);
        const extra = (await s.targetSide.keys()).filter((k) => !keys.includes(k));
        const bytes = workers.reduce((n, w) => n + w.copier.counts.bytes, 0);
        // A key DELeted on the source while a copy of it was in parts is DELeted on the target (nothing built to RENAME): no failure.
        const failures = failuresOf(workers);
        console.log(
          `[${name}, big] ${run.writes} writes (${run.deleted.size} keys DELeted), ${run.copies} copies (${run.overlapped} writes copied by all 3 at once), ${run.rejected} rejected (${failures.keptChanging} KeyKeptChanging), ${run.confirmedAgain} puts again after a confirming read, ` +
            `${bytes} bytes; same value, other DUMP: ${JSON.stringify(otherDump)}; ${run.counts}`,
        );

        expect(run.writes).toBeGreaterThan(300);
        expect(run.overlapped).toBeGreaterThan(30);
        expect(run.confirmedAgain).toBeGreaterThan(0);
        expect(bytes).toBeGreaterThan(keys.length * 20_000); // the big keys did go in parts
        expect(diffs).toEqual([]);
        expect(leftovers).toEqual([]);
        expect(extra).toEqual([]);
        expect(await leftoverParts(s.sourceSide)).toEqual([]);
        expect(failures.unexpected).toEqual([]); // no ERR no such key for the keys DELeted mid-copy, nor any other
        expect(failures.keptChanging).toBe(0);
        expect(run.rejected).toBe(0);
      }, 60_000);
    });
  }
});

/* ------------------------------------------------------------------------------------------------
 * One interleaving, by hand
 * --------------------------------------------------------------------------------------------- */

/**
 * Holds the first `command` the side sends (RESTORE or RENAME to the target, GETRANGE, HSCAN or
 * LRANGE to the source) until released; `arrived` resolves when it is held.
 */
function holdFirst(side: MigrationSide, command: string): { arrived: Promise<void>; release: () => void } {
  let arrive!: () => void;
  let release!: () => void;
  const arrived = new Promise<void>((r) => (arrive = r));
  const released = new Promise<void>((r) => (release = r));
  const call = side.callFor.bind(side);
  let armed = true;
  side.callFor = async (key, db, args) => {
    if (armed && String(args[0]).toUpperCase() === command) {
      armed = false;
      arrive();
      await released;
    }
    return call(key, db, args);
  };
  return { arrived, release };
}

describe('migration: a copy that lands after a later write was copied', () => {
  const cases: Array<{ name: string; confirm: boolean; big: boolean; held: string; later: 'kept' | 'lost' }> = [
    { name: 'confirmed, one RESTORE: the later write is kept', confirm: true, big: false, held: 'RESTORE', later: 'kept' },
    { name: 'confirmed, in parts: the later write is kept', confirm: true, big: true, held: 'RENAME', later: 'kept' },
    { name: 'unconfirmed, one RESTORE: the later write is lost (what confirm is for)', confirm: false, big: false, held: 'RESTORE', later: 'lost' },
  ];
  for (const c of cases) {
    it(c.name, async () => {
      const s = await standaloneTarget();
      const client = directClient(s.source);
      const [a, b] = await startWorkers(2, s.sourceAddress, s.targetAddress, c.big ? 2_048 : Number.POSITIVE_INFINITY, c.confirm);
      const value = (v: string) => (c.big ? `${v}:${bigText(20_000)}` : v);
      const first = value('first');
      const second = value('second');

      await client.set('race', first);
      const held = holdFirst(a!.target, c.held);
      const copyA = copyOn(a!, 'race'); // reads "first"; its RESTORE (or RENAME) waits
      await held.arrived;
      await client.set('race', second); // a later write…
      await copyOn(b!, 'race'); // …copied by another worker: the target holds "second"
      expect(await s.targetSide.reader.call('GET', 'race')).toBe(second);
      held.release(); // the first copy lands over it
      await copyA;
      await Promise.all([a!.copier.idle(), b!.copier.idle()]);

      expect(await s.sourceSide.reader.call('GET', 'race')).toBe(second);
      expect(await s.targetSide.reader.call('GET', 'race')).toBe(c.later === 'kept' ? second : first);
      expect(failuresOf([a!, b!]).unexpected).toEqual([]);
      expect(await leftoverParts(s.targetSide)).toEqual([]);
    }, 30_000);
  }
});

describe('migration: a big key DELeted on the source while a confirmed copy reads it in parts', () => {
  const cases: Array<{ type: string; held: string; make: (c: Valkey, key: string) => Promise<unknown> }> = [
    { type: 'string', held: 'GETRANGE', make: (c, key) => c.set(key, bigText(20_000)) },
    { type: 'hash', held: 'HSCAN', make: (c, key) => c.hset(key, ...Array.from({ length: 40 }, (_, f) => [`f${f}`, bigText(500)]).flat()) },
    { type: 'list', held: 'LRANGE', make: (c, key) => c.rpush(key, ...Array.from({ length: 40 }, () => bigText(500))) },
  ];
  for (const c of cases) {
    it(`a ${c.type} (its first ${c.held} held, DEL on the source, released): the copy resolves and the key is gone on the target`, async () => {
      const s = await standaloneTarget();
      const client = directClient(s.source);
      const [w] = await startWorkers(1, s.sourceAddress, s.targetAddress, 2_048, true);
      await c.make(client, 'gone');
      await copyOn(w!, 'gone', 'scan'); // the scan's copy: the key on the target, in parts
      expect(await s.targetSide.reader.type('gone')).toBe(c.type);

      const sent: string[] = [];
      const call = w!.target.callFor.bind(w!.target);
      w!.target.callFor = (key, db, args) => {
        sent.push(String(args[0]).toUpperCase());
        return call(key, db, args);
      };
      const held = holdFirst(w!.source, c.held);
      const copy = copyOn(w!, 'gone'); // its DUMP read the key (a payload too big: in parts); its first read of the value waits
      await held.arrived;
      expect(await client.del('gone')).toBe(1); // the value goes from under it
      held.release(); // the read finds nothing: nothing is built under the temporary name
      await expect(copy).resolves.toBeUndefined(); // (it failed with ERR no such key when it RENAMEd the name never built)
      await w!.copier.idle();

      expect(await s.targetSide.reader.call('EXISTS', 'gone')).toBe(0);
      expect(sent).not.toContain('RENAME'); // DELeted on the target instead
      expect(w!.failures).toEqual([]);
      expect(await leftoverParts(s.targetSide)).toEqual([]);
      expect(await s.targetSide.keys()).toEqual([]);
    }, 30_000);
  }
});
