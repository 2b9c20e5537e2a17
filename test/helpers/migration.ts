/**
 * Helpers of the live-migration tests (test/integration/migration*.test.ts, src/migration):
 * RESPOOL MIGRATE through a client, a seeded keyspace of every type, a whole-value reading of
 * keys (type, value, expiry) that two servers of other versions answer alike, and writers that
 * keep a model of what each of their keys must hold, checked against every reply.
 */
import { rmSync } from 'node:fs';
import { expect } from 'vitest';
import { Valkey } from 'iovalkey';
import type { RespoolProxy } from '../../src/server.js';
import { clientFor, startTestProxy } from './proxy.js';
import { cutoverRecordPath } from '../../src/migration/cutover-record.js';
import { seededRandom } from './test-data.js';
import { sleep } from './wait.js';

export type MigrateStatus = Record<string, string | number | null>;

/** RESPOOL MIGRATE STATUS as a record (a RESP2 map is a flat array). */
export async function migrateStatus(client: Valkey): Promise<MigrateStatus> {
  const flat = (await client.call('RESPOOL', 'MIGRATE', 'STATUS')) as Array<string | number | null>;
  const out: MigrateStatus = {};
  for (let i = 0; i + 1 < flat.length; i += 2) out[String(flat[i])] = flat[i + 1]!;
  return out;
}

/** RESPOOL MIGRATE <args…>: the reply, or the error's message as `{ error }`. */
export async function migrate(client: Valkey, ...args: Array<string | number>): Promise<unknown> {
  try {
    return await client.call('RESPOOL', 'MIGRATE', ...args);
  } catch (err) {
    return { error: (err as Error).message };
  }
}

/**
 * Waits until STATUS's state is `state` (polling every 50 ms); the last status in the error when
 * it is not within timeoutMs, or at once when the state is one of `failOn`.
 */
export async function waitForState(client: Valkey, state: string, timeoutMs: number, failOn: string[] = ['aborted'], seen?: (status: MigrateStatus) => void): Promise<MigrateStatus> {
  const deadline = Date.now() + timeoutMs;
  let last: MigrateStatus = {};
  for (;;) {
    last = await migrateStatus(client);
    seen?.(last);
    if (last['state'] === state) return last;
    if (failOn.includes(String(last['state']))) throw new Error(`migration is ${String(last['state'])}, not ${state}: ${JSON.stringify(last)}`);
    if (Date.now() > deadline) throw new Error(`timed out (${timeoutMs} ms) waiting for migration state ${state}: ${JSON.stringify(last)}`);
    await sleep(50);
  }
}

/* ------------------------------------------------------------------------------------------------
 * Whole values
 * --------------------------------------------------------------------------------------------- */

/** A key's type and value read whole, normalized (hash fields and set members sorted), and its PTTL. */
export interface KeyValue {
  type: string;
  value: unknown;
  pttl: number;
  /** When the PTTL was read (Date.now(), the middle of its batch's round trip): a long read of many keys does not shift their expiries. */
  at?: number;
}

/** Buffers (and arrays of them) as latin1 strings: every byte kept, comparable with toEqual. */
function text(reply: unknown): unknown {
  if (Buffer.isBuffer(reply)) return reply.toString('latin1');
  if (Array.isArray(reply)) return reply.map(text);
  return reply;
}

/** [k1, v1, k2, v2 …] as an object (XINFO's replies). */
function pairs(flat: unknown[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (let i = 0; i + 1 < flat.length; i += 2) out[String(flat[i])] = flat[i + 1];
  return out;
}

/** Reads keys whole through `client` (a plain client: one node, or respool), in pipelined batches. Null for a key that does not exist. */
export async function readKeys(client: Valkey, keys: readonly string[], batch = 400): Promise<Map<string, KeyValue | null>> {
  const out = new Map<string, KeyValue | null>();
  for (let at = 0; at < keys.length; at += batch) {
    const part = keys.slice(at, at + batch);
    const head = client.pipeline();
    for (const k of part) head.type(k).pttl(k);
    const sent = Date.now();
    const heads = (await head.exec())!;
    const readAt = (sent + Date.now()) / 2;
    const reads = client.pipeline();
    const plan: Array<{ key: string; type: string; pttl: number; reads: number; at: number }> = [];
    for (let i = 0; i < part.length; i++) {
      const [typeErr, type] = heads[2 * i]!;
      const [ttlErr, pttl] = heads[2 * i + 1]!;
      if (typeErr !== null || ttlErr !== null) throw new Error(`TYPE/PTTL ${part[i]}: ${String(typeErr ?? ttlErr)}`);
      const key = part[i]!;
      const t = String(type);
      let n = 0;
      if (t === 'string') (reads.getBuffer(key), (n = 1));
      else if (t === 'hash') (reads.callBuffer('HGETALL', key), (n = 1));
      else if (t === 'list') (reads.callBuffer('LRANGE', key, 0, -1), (n = 1));
      else if (t === 'set') (reads.callBuffer('SMEMBERS', key), (n = 1));
      else if (t === 'zset') (reads.callBuffer('ZRANGE', key, 0, -1, 'WITHSCORES'), (n = 1));
      else if (t === 'stream') {
        reads.callBuffer('XRANGE', key, '-', '+').callBuffer('XINFO', 'STREAM', key).callBuffer('XINFO', 'GROUPS', key);
        n = 3;
      } else if (t !== 'none') throw new Error(`${key}: type ${t} is not read here`);
      plan.push({ key, type: t, pttl: Number(pttl), reads: n, at: readAt });
    }
    const replies = plan.some((p) => p.reads > 0) ? (await reads.exec())! : [];
    let r = 0;
    for (const p of plan) {
      const got = replies.slice(r, r + p.reads).map(([err, v]) => {
        if (err !== null) throw new Error(`reading ${p.key} (${p.type}): ${err.message}`);
        return text(v);
      });
      r += p.reads;
      if (p.type === 'none') {
        out.set(p.key, null);
        continue;
      }
      let value: unknown = got[0];
      if (p.type === 'hash') {
        const flat = got[0] as string[];
        const entries: Array<[string, string]> = [];
        for (let i = 0; i + 1 < flat.length; i += 2) entries.push([flat[i]!, flat[i + 1]!]);
        value = entries.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
      } else if (p.type === 'set') value = [...(got[0] as string[])].sort();
      // Scores as numbers: Valkey 8 writes a double's shortest form (0.1), Redis 7.0 its %.17g (0.10000000000000001).
      else if (p.type === 'zset') value = (got[0] as string[]).map((v, i) => (i % 2 === 1 ? Number(v) : v));
      else if (p.type === 'stream') {
        const info = pairs(got[1] as unknown[]);
        const groups = (got[2] as unknown[][]).map((g) => pairs(g));
        value = {
          entries: got[0],
          length: info['length'],
          lastGeneratedId: info['last-generated-id'],
          maxDeletedId: info['max-deleted-entry-id'],
          entriesAdded: info['entries-added'],
          groups,
        };
      }
      out.set(p.key, { type: p.type, value, pttl: p.pttl, at: p.at });
    }
    // A stream's groups' consumers and pending entries (idle times left out: they move).
    for (const p of plan) {
      if (p.type !== 'stream') continue;
      const v = out.get(p.key)!.value as { groups: Array<Record<string, unknown>> };
      for (const g of v.groups) {
        const name = String(g['name']);
        const consumers = text(await client.callBuffer('XINFO', 'CONSUMERS', p.key, name)) as unknown[][];
        g['consumers'] = consumers.map((c) => {
          const o = pairs(c);
          return { name: o['name'], pending: o['pending'] };
        });
        const pending = text(await client.callBuffer('XPENDING', p.key, name, '-', '+', 10_000)) as unknown[][];
        g['pendingEntries'] = pending.map((e) => [e[0], e[1], e[3]]); // id, consumer, deliveries
      }
    }
  }
  return out;
}

/**
 * The differences between what `expected` (read at `expectedAt`, Date.now(), unless a value says
 * when it was read) says and what `actual` holds: values equal, and each expiry within `slackMs`
 * of the same moment.
 */
export function differences(expected: Map<string, KeyValue | null>, expectedAt: number, actual: Map<string, KeyValue | null>, actualAt: number, slackMs = 1_000): string[] {
  const out: string[] = [];
  for (const [key, want] of expected) {
    const got = actual.get(key);
    if (got === undefined) {
      out.push(`${key}: not read`);
      continue;
    }
    if (want === null || got === null) {
      if (want !== got) out.push(`${key}: expected ${want === null ? 'no key' : want.type}, found ${got === null ? 'no key' : got.type}`);
      continue;
    }
    if (want.type !== got.type) out.push(`${key}: type ${got.type}, expected ${want.type}`);
    else if (JSON.stringify(want.value) !== JSON.stringify(got.value)) out.push(`${key}: ${want.type} ${short(got.value)}, expected ${short(want.value)}`);
    if ((want.pttl < 0 || got.pttl < 0) && want.pttl !== got.pttl) out.push(`${key}: PTTL ${got.pttl}, expected ${want.pttl}`);
    else if (want.pttl >= 0 && Math.abs((want.at ?? expectedAt) + want.pttl - ((got.at ?? actualAt) + got.pttl)) > slackMs) {
      out.push(`${key}: expires at ${Math.round((got.at ?? actualAt) + got.pttl)}, expected ${Math.round((want.at ?? expectedAt) + want.pttl)} (±${slackMs} ms)`);
    }
  }
  return out;
}

function short(v: unknown): string {
  const s = JSON.stringify(v);
  return s.length > 160 ? `${s.slice(0, 160)}…(${s.length} chars)` : s;
}

/** Every key a plain client to one node (or a standalone respool) holds in its database, by SCAN. */
export async function scanKeys(client: Valkey): Promise<string[]> {
  const keys: string[] = [];
  let cursor = '0';
  do {
    const [next, batch] = (await client.callBuffer('SCAN', cursor, 'COUNT', 1000)) as [Buffer, Buffer[]];
    cursor = next.toString();
    for (const k of batch) keys.push(k.toString('latin1'));
  } while (cursor !== '0');
  return keys.sort();
}

/** DUMP and PEXPIRETIME (absolute: it does not move) of every key of a node's database: what "unchanged" is compared by. */
export async function dumpAll(client: Valkey): Promise<Map<string, { dump: string; expireTime: number }>> {
  const out = new Map<string, { dump: string; expireTime: number }>();
  const keys = await scanKeys(client);
  for (let at = 0; at < keys.length; at += 500) {
    const pipe = client.pipeline();
    for (const k of keys.slice(at, at + 500)) pipe.dumpBuffer(k).call('PEXPIRETIME', k);
    const replies = (await pipe.exec())!;
    keys.slice(at, at + 500).forEach((k, i) => {
      const dump = replies[2 * i]![1] as Buffer;
      out.set(k, { dump: dump.toString('base64'), expireTime: Number(replies[2 * i + 1]![1]) });
    });
  }
  return out;
}

/* ------------------------------------------------------------------------------------------------
 * A seeded keyspace
 * --------------------------------------------------------------------------------------------- */

export interface SeedCounts {
  strings: number;
  hashes: number;
  lists: number;
  sets: number;
  zsets: number;
  streams: number;
  /** Keys with an expiry (strings and hashes, 300–900 s). */
  withTtl: number;
}

export const SEED_COUNTS: SeedCounts = { strings: 1200, hashes: 300, lists: 300, sets: 300, zsets: 300, streams: 12, withTtl: 400 };

/**
 * Writes keys of every type under `prefix` through `client` (pipelined): strings (short, long,
 * integers, binary), hashes, lists, sets (integers and words), sorted sets, each in small and big
 * encodings, streams with consumer groups (pending, acknowledged and deleted entries), and
 * strings and hashes with expiries. Returns the keys.
 */
export async function seedKeyspace(client: Valkey, prefix: string, counts: SeedCounts = SEED_COUNTS, seed = 1): Promise<string[]> {
  const rand = seededRandom(seed);
  const int = (n: number) => Math.floor(rand() * n);
  const word = (n = 8) => Array.from({ length: 1 + int(n) }, () => String.fromCharCode(97 + int(26))).join('');
  const keys: string[] = [];
  let pipe = client.pipeline();
  let queued = 0;
  const flush = async (force = false) => {
    if (!force && queued < 500) return;
    const replies = (await pipe.exec())!;
    for (const [err] of replies) if (err !== null) throw new Error(`seeding: ${err.message}`);
    pipe = client.pipeline();
    queued = 0;
  };
  for (let i = 0; i < counts.strings; i++) {
    const k = `${prefix}str:${i}`;
    keys.push(k);
    const shape = i % 4;
    if (shape === 0) pipe.set(k, String(int(1_000_000)));
    else if (shape === 1) pipe.set(k, word(20));
    else if (shape === 2) pipe.set(k, `${word(5)}:`.repeat(30 + int(100)));
    else pipe.set(k, Buffer.from(Array.from({ length: 16 + int(64) }, () => int(256))));
    queued++;
    await flush();
  }
  for (let i = 0; i < counts.hashes; i++) {
    const k = `${prefix}hash:${i}`;
    keys.push(k);
    const fields = i % 50 === 0 ? 300 : 1 + int(20); // a few past the listpack limit (128)
    const args: string[] = [];
    for (let f = 0; f < fields; f++) args.push(`f${f}`, i % 3 === 0 ? String(int(1000)) : word(12));
    pipe.hset(k, ...args);
    queued++;
    await flush();
  }
  for (let i = 0; i < counts.lists; i++) {
    const k = `${prefix}list:${i}`;
    keys.push(k);
    const items = i % 50 === 0 ? 2000 : 1 + int(30);
    pipe.rpush(k, ...Array.from({ length: items }, (_, j) => (j % 2 === 0 ? String(j) : word(10))));
    queued++;
    await flush();
  }
  for (let i = 0; i < counts.sets; i++) {
    const k = `${prefix}set:${i}`;
    keys.push(k);
    const members = i % 50 === 0 ? 600 : 1 + int(30);
    const ints = i % 2 === 0; // an intset, or words
    pipe.sadd(k, ...Array.from({ length: members }, (_, j) => (ints ? String(j * 7 + int(5)) : `${word(6)}${j}`)));
    queued++;
    await flush();
  }
  for (let i = 0; i < counts.zsets; i++) {
    const k = `${prefix}zset:${i}`;
    keys.push(k);
    const members = i % 50 === 0 ? 400 : 1 + int(30);
    const args: Array<string | number> = [];
    for (let j = 0; j < members; j++) args.push(j % 3 === 0 ? j : (rand() * 1000 - 500).toFixed(3), `m${j}:${word(4)}`);
    pipe.zadd(k, ...args);
    queued++;
    await flush();
  }
  await flush(true);
  for (let i = 0; i < counts.streams; i++) {
    const k = `${prefix}stream:${i}`;
    keys.push(k);
    const entries = i === 0 ? 1500 : 10 + int(50); // at least 7: 4 for alice, 3 for bob
    for (let j = 0; j < entries; j++) {
      pipe.xadd(k, '*', 'n', String(j), 'w', word(8));
      queued++;
    }
    await flush(true);
    if (i % 3 === 2) continue; // a stream without groups
    await client.xgroup('CREATE', k, 'g1', '0');
    await client.xgroup('CREATE', k, 'g2', '$');
    await client.xreadgroup('GROUP', 'g1', 'alice', 'COUNT', 4, 'STREAMS', k, '>');
    const read = (await client.xreadgroup('GROUP', 'g1', 'bob', 'COUNT', 3, 'STREAMS', k, '>')) as Array<[string, Array<[string, string[]]>]>;
    const ids = read[0]![1].map((e) => e[0]);
    await client.xack(k, 'g1', ids[0]!); // one of bob's acknowledged: pending 2 for bob, 4 for alice
    await client.xdel(k, ids[1]!); // a deleted entry (max-deleted-entry-id), still pending
  }
  for (let i = 0; i < counts.withTtl; i++) {
    const k = `${prefix}ttl:${i}`;
    keys.push(k);
    const ms = 300_000 + int(600_000);
    if (i % 2 === 0) pipe.set(k, word(30), 'PX', ms);
    else pipe.hset(k, 'a', word(10), 'b', String(i)).pexpire(k, ms);
    queued++;
    await flush();
  }
  await flush(true);
  return keys;
}

/* ------------------------------------------------------------------------------------------------
 * Writers with a model
 * --------------------------------------------------------------------------------------------- */

type Kind = 'str' | 'ctr' | 'hash' | 'list';
const KINDS: readonly Kind[] = ['str', 'ctr', 'hash', 'list'];

/** What a writer's key must hold, by the replies its writer was given. */
export interface ModelEntry {
  kind: Kind;
  str?: string;
  ctr?: number;
  hash?: Map<string, string>;
  list?: string[];
  /** Date.now() of its expiry, or null. */
  expireAt: number | null;
}

/**
 * A client writing its own keys (w<id>:<kind>:<n>) one command at a time for as long as it runs —
 * SET (with PX now and then), INCR, HSET, RPUSH, DEL, EXPIRE — keeping a model of every key and
 * checking each reply against it: a reply the model did not expect is a lost or doubled write.
 */
export class ModelWriter {
  readonly model = new Map<string, ModelEntry>();
  readonly names: string[] = [];
  ops = 0;
  readonly errors: string[] = [];
  readonly mismatches: string[] = [];
  private stopped = false;
  private running: Promise<void> | null = null;
  private readonly rand: () => number;

  constructor(
    private readonly client: Valkey,
    readonly id: number,
    /** At most this many commands a second (on average since start()). */
    private readonly opsPerSecond = 700,
    keysPerKind = 60,
  ) {
    this.rand = seededRandom(1000 + id);
    for (const kind of KINDS) for (let i = 0; i < keysPerKind; i++) this.names.push(`w${id}:${kind}:${i}`);
  }

  start(): void {
    this.running = this.loop();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.running;
  }

  private pick<T>(xs: readonly T[]): T {
    return xs[Math.floor(this.rand() * xs.length)]!;
  }

  private async loop(): Promise<void> {
    const began = performance.now();
    while (!this.stopped) {
      try {
        await this.step();
      } catch (err) {
        this.errors.push(`${(err as Error).message}`);
        if (this.errors.length > 50) return; // something is badly wrong: enough said
      }
      this.ops++;
      const ahead = (this.ops * 1000) / this.opsPerSecond - (performance.now() - began);
      if (ahead > 2) await sleep(ahead);
      else if (this.ops % 50 === 0) await new Promise((r) => setImmediate(r)); // let the others run
    }
  }

  private mismatch(what: string, got: unknown, want: unknown): void {
    this.mismatches.push(`${what}: replied ${JSON.stringify(got)}, expected ${JSON.stringify(want)}`);
  }

  private async step(): Promise<void> {
    const r = this.rand();
    const c = this.client;
    if (r < 0.07) {
      // DEL a key of any kind
      const key = this.pick(this.names);
      const got = await c.del(key);
      const want = this.model.has(key) ? 1 : 0;
      if (got !== want) this.mismatch(`DEL ${key}`, got, want);
      this.model.delete(key);
      return;
    }
    if (r < 0.15) {
      // EXPIRE a key of any kind, 100–200 s
      const key = this.pick(this.names);
      const seconds = 100 + Math.floor(this.rand() * 100);
      const before = Date.now();
      const got = await c.expire(key, seconds);
      const at = (before + Date.now()) / 2 + seconds * 1000;
      const entry = this.model.get(key);
      const want = entry === undefined ? 0 : 1;
      if (got !== want) this.mismatch(`EXPIRE ${key}`, got, want);
      if (entry !== undefined) entry.expireAt = at;
      return;
    }
    const kind = this.pick(KINDS);
    const key = `w${this.id}:${kind}:${Math.floor(this.rand() * (this.names.length / KINDS.length))}`;
    const entry = this.model.get(key);
    if (kind === 'str') {
      const value = `v${this.ops}-${this.rand().toString(36).slice(2)}`;
      if (this.rand() < 0.25) {
        const ms = 100_000 + Math.floor(this.rand() * 100_000);
        const before = Date.now();
        const got = await c.set(key, value, 'PX', ms);
        if (got !== 'OK') this.mismatch(`SET ${key} PX`, got, 'OK');
        this.model.set(key, { kind, str: value, expireAt: (before + Date.now()) / 2 + ms });
      } else {
        const got = await c.set(key, value);
        if (got !== 'OK') this.mismatch(`SET ${key}`, got, 'OK');
        this.model.set(key, { kind, str: value, expireAt: null }); // SET drops the expiry
      }
    } else if (kind === 'ctr') {
      const got = await c.incr(key);
      const want = (entry?.ctr ?? 0) + 1;
      if (got !== want) this.mismatch(`INCR ${key}`, got, want);
      this.model.set(key, { kind, ctr: want, expireAt: entry?.expireAt ?? null });
    } else if (kind === 'hash') {
      const field = `f${Math.floor(this.rand() * 8)}`;
      const value = `h${this.ops}`;
      const hash = new Map(entry?.hash ?? []);
      const want = hash.has(field) ? 0 : 1;
      const got = await c.hset(key, field, value);
      if (got !== want) this.mismatch(`HSET ${key} ${field}`, got, want);
      hash.set(field, value);
      this.model.set(key, { kind, hash, expireAt: entry?.expireAt ?? null });
    } else {
      const item = `i${this.ops}`;
      const list = [...(entry?.list ?? []), item];
      const got = await c.rpush(key, item);
      if (got !== list.length) this.mismatch(`RPUSH ${key}`, got, list.length);
      this.model.set(key, { kind, list, expireAt: entry?.expireAt ?? null });
    }
  }

  /** The model as readKeys reads keys (null: no key), its expiries as PTTLs from `at`. */
  expected(at: number): Map<string, KeyValue | null> {
    const out = new Map<string, KeyValue | null>();
    for (const name of this.names) {
      const e = this.model.get(name);
      if (e === undefined) {
        out.set(name, null);
        continue;
      }
      const pttl = e.expireAt === null ? -1 : Math.round(e.expireAt - at);
      if (e.kind === 'str') out.set(name, { type: 'string', value: e.str, pttl });
      else if (e.kind === 'ctr') out.set(name, { type: 'string', value: String(e.ctr), pttl });
      else if (e.kind === 'hash') out.set(name, { type: 'hash', value: [...e.hash!.entries()].sort((a, b) => (a[0] < b[0] ? -1 : 1)), pttl });
      else out.set(name, { type: 'list', value: e.list, pttl });
    }
    return out;
  }
}

/**
 * Writers after a cutover whose source was just stopped: they go on (more than `minOps` in
 * `ms`), then stop; none had a client error or a reply its model did not expect. Their models'
 * expected keys, as of now, with the moment they are for.
 */
export async function writersGoOnThenStop(writers: readonly ModelWriter[], ms = 2_000, minOps = 200): Promise<{ expected: Map<string, KeyValue | null>; at: number }> {
  const ops = () => writers.reduce((n, w) => n + w.ops, 0);
  try {
    const before = ops();
    await sleep(ms);
    expect(ops() - before, 'writes after the source stopped').toBeGreaterThan(minOps);
  } finally {
    await Promise.all(writers.map((w) => w.stop()));
  }
  for (const w of writers) {
    expect(w.errors, `writer ${w.id}: client errors`).toEqual([]);
    expect(w.mismatches, `writer ${w.id}: replies the model did not expect`).toEqual([]);
  }
  const at = Date.now();
  return { expected: new Map(writers.flatMap((w) => [...w.expected(at)])), at };
}

/**
 * What a migration test started — servers, proxies (their state files removed), clients — ended
 * after it whatever happened: `stopAll()` in afterEach.
 */
export class TestResources {
  private readonly started: Array<{ stop(): Promise<void> }> = [];
  private readonly clients: Valkey[] = [];

  readonly stopAll = async (): Promise<void> => {
    for (const c of this.clients.splice(0)) c.disconnect();
    for (const s of this.started.splice(0).reverse()) await s.stop().catch(() => undefined);
  };

  /** Ends `thing` after the test; a promise of one (a server starting) is kept once it resolves. */
  readonly keep = <T extends { stop(): Promise<void> }>(thing: T): T => {
    this.started.push(thing);
    return thing;
  };

  readonly keepStarted = async <T extends { stop(): Promise<void> }>(starting: Promise<T>): Promise<T> => this.keep(await starting);

  readonly proxyFor = async (upstreams: Array<{ host: string; port: number }>, overrides: Parameters<typeof startTestProxy>[1] = {}): Promise<RespoolProxy> => {
    const proxy = await startTestProxy(upstreams, overrides);
    this.started.push({
      stop: async () => {
        await proxy.close();
        rmSync(proxy.config.migration.stateFile, { force: true }); // a migration left synced keeps its state file
        rmSync(cutoverRecordPath(proxy.config.migration.stateFile), { force: true }); // and one cut over, where the upstreams went
      },
    });
    return proxy;
  };

  readonly client = (proxy: RespoolProxy, db = 0): Valkey => {
    const c = clientFor(proxy, { db });
    this.clients.push(c);
    return c;
  };

  readonly direct = (node: { host: string; port: number; password?: string }, db = 0): Valkey => {
    const c = new Valkey({ host: node.host, port: node.port, password: node.password, db, maxRetriesPerRequest: 0, lazyConnect: false });
    c.on('error', () => undefined); // a server the test stopped: its commands fail, that is enough
    this.clients.push(c);
    return c;
  };
}
