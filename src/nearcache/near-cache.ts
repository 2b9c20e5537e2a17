import calculateSlot from 'cluster-key-slot';
import type { Logger } from 'pino';
import type { Topology } from '../cluster/topology.js';
import { encodeCommand } from '../resp/encode.js';
import { invalidatedKeys } from '../keys/tracking-names.js';
import { globMatch } from '../util/glob.js';
import type { LeasePools } from '../upstream/lease-pools.js';
import type { LeasedConnection } from '../upstream/leased-connection.js';
import { CacheStore, entryName, type CacheEntry } from './cache-store.js';
import { ReadCoalescing } from './read-coalescing.js';
import { fillCommand, isWrongType, nil, replyFor, sharesFill, valueOf, type CachedRead } from './cached-value.js';

/**
 * respool's near cache (docs/near-cache.md): string values of the keys nearCache.keys names,
 * held in respool's memory and answered from there, kept exact by the nodes' invalidations.
 *
 *   fill        : a miss sends GET + PTTL on a tracking connection to the key's primary (one per
 *                 node and database, RESP3, CLIENT TRACKING ON): its invalidations come on the
 *                 connection that read the value, so one can never arrive before the reply it
 *                 invalidates
 *   coalescing  : reads of a key whose fill is in flight wait for that fill (one node read)
 *   writes      : a write through respool drops the key's entry before it is sent, and while it is
 *                 in flight (begin → end) reads of the key go to the node (behind the write on the
 *                 client's link) rather than to a fill, which could run on the node before the
 *                 write; a fill started before it is not kept, and no read joins it
 *   invalidation: a push from a node drops the keys it names (every key of that node for a null
 *                 one); a tracking connection lost drops every entry it filled
 *   bounds      : bytes (cache-store.ts), the key's TTL, maxAgeMs
 *
 * What is answered here: reads of one key of a string, a hash, a set or a list (cached-value.ts:
 * each type is read whole — GET, HGETALL, SMEMBERS, LRANGE 0 -1 — and every read of it answered
 * from that). Anything else, a fill that failed or met a redirect, goes to the node as it would
 * without the cache.
 */

export interface NearCacheSettings {
  keys: string[];
  /** Also cache the keys the hot-key detector ranks hot (setHot). */
  hot: boolean;
  /** Identical reads of keys not cached share one node read (read-coalescing.ts); off with confirm. */
  coalesceAll?: boolean;
  maxBytes: number;
  maxEntryBytes: number;
  maxAgeMs: number;
}

export type { CachedRead } from './cached-value.js';

/** One client read waiting for a fill. */
export interface CacheWaiter {
  kind: CachedRead;
  /** Its arguments past the key (HGET's, HMGET's … fields). */
  fields: Buffer[];
  protocol: 2 | 3;
  /** The reply, when the fill gave one. */
  answer(reply: Buffer): void;
  /** Send the read to the node as it came (the fill cannot answer it). */
  passOn(): void;
}

interface Fill {
  readonly name: string;
  readonly key: Buffer;
  readonly db: number;
  readonly node: string;
  /** The fill's command (cached-value.ts fillCommand): the key goes after its name. */
  readonly command: readonly string[];
  /** False once a write or an invalidation met it: its value is answered, not kept. */
  keep: boolean;
  readonly waiters: CacheWaiter[];
}

/** What a write through respool holds while it is in flight (beginWrite → endWrite); names null: every key. */
export interface WriteMark {
  readonly names: string[] | null;
}

export interface NearCacheCounters {
  hits: number;
  misses: number;
  fills: number;
  coalesced: number;
  invalidations: number;
  passedOn: number;
  /** PINGs sent to confirm a batch of reads (nearCache.confirm). */
  confirms: number;
}

const TRACKING_ON = encodeCommand(['CLIENT', 'TRACKING', 'ON']);
const PING = encodeCommand(['PING']);

interface PendingRead {
  db: number;
  key: Buffer;
  waiter: CacheWaiter;
}

export interface NearCacheDeps {
  dedicated: LeasePools;
  /** Hits wait for a PING on their tracking connection (config nearCache.confirm, as the backend resolves it). */
  confirm?: boolean;
  topology: () => Topology | null;
  commandMs: () => number;
  log: Logger;
  now?: () => number;
}

export class NearCache {
  private readonly settings: NearCacheSettings;
  private readonly patterns: Buffer[];
  private readonly store: CacheStore;
  private readonly fills = new Map<string, Fill>();
  /** Keys with a write through respool in flight, and how many. */
  private readonly writing = new Map<string, number>();
  /** Writes to every key (FLUSHALL, FLUSHDB, SWAPDB) in flight. */
  private writingEverything = 0;
  /** Tracking connections per "host:port/db": open, or being opened. */
  private readonly conns = new Map<string, LeasedConnection | Promise<LeasedConnection | null>>();
  readonly counters: NearCacheCounters = { hits: 0, misses: 0, fills: 0, coalesced: 0, invalidations: 0, passedOn: 0, confirms: 0 };
  private readonly now: () => number;
  private closed = false;

  constructor(settings: NearCacheSettings, private readonly deps: NearCacheDeps) {
    this.settings = settings;
    this.patterns = settings.keys.map((k) => Buffer.from(k, 'latin1'));
    this.store = new CacheStore(settings);
    this.now = deps.now ?? Date.now;
    this.coalescing = settings.coalesceAll === true && deps.confirm !== true ? new ReadCoalescing() : null;
  }

  /** Keys the last detection window ranked hot (latin1 names), cached with `hot: true`. */
  private hotKeys: ReadonlySet<string> = new Set();

  /** Identical reads of keys not cached, sharing one node read (nearCache.coalesceAll without confirm); null when off. */
  readonly coalescing: ReadCoalescing | null;

  /** Any key configured, hot keys cached, or reads coalesced: the hot path asks nothing more when false. */
  get active(): boolean {
    return (this.patterns.length > 0 || this.settings.hot || this.coalescing !== null) && !this.closed;
  }

  /**
   * The keys the detector ranks hot now (hotKeys.detection: one window's top keys). With
   * `hot: true` they are cached from now on; those no longer hot (and named by no glob) go.
   */
  setHot(keys: readonly string[]): void {
    if (!this.settings.hot) return;
    this.hotKeys = new Set(keys);
    this.store.dropWhere((e) => !this.matches(e.key));
  }

  matches(key: Buffer): boolean {
    for (const p of this.patterns) if (globMatch(p, key)) return true;
    return this.hotKeys.size > 0 && this.hotKeys.has(key.toString('latin1'));
  }

  /**
   * A read of a cached kind on `key` (as the node stores it): answered from memory (true, the
   * reply given to `waiter.answer` now), joined to a fill in flight, or a fill started (true, the
   * reply comes later); false when the cache cannot take it (the caller sends it on).
   */
  read(db: number, key: Buffer, waiter: CacheWaiter): boolean {
    if (!this.matches(key) || this.nodeFor(key) === null) return false;
    if (!this.deps.confirm) return this.serveOne(db, key, waiter, this.now());
    // confirm: answered once a PING behind the invalidations already sent has come back (confirmThenServe).
    this.reads.push({ db, key, waiter });
    if (this.reads.length === 1) setImmediate(this.answerReads);
    return true;
  }

  private readonly answerReads = (): void => {
    const reads = this.reads;
    this.reads = [];
    this.confirmThenServe(reads);
  };

  /**
   * nearCache.confirm: a PING on each tracking connection the batch's keys use, and the batch
   * served once every PONG is in. The node answers PING after every invalidation it queued
   * before, so a write acknowledged anywhere before these reads arrived has been heard.
   */
  private confirmThenServe(reads: PendingRead[]): void {
    const conns = new Map<LeasedConnection, string>();
    for (const { key, db } of reads) {
      const node = this.nodeFor(key);
      const conn = node === null ? undefined : this.conns.get(`${node}/${db}`);
      if (conn !== undefined && !(conn instanceof Promise)) conns.set(conn, node!);
    }
    if (conns.size === 0) return this.serve(reads);
    let left = conns.size;
    const done = () => {
      if (--left === 0) this.serve(reads);
    };
    this.counters.confirms += conns.size;
    for (const [conn, node] of conns) {
      conn.send(PING, {
        sentAt: 0,
        onReply: done,
        onLinkFailure: () => {
          this.dropNode(node); // before 'close' reaches lost(): nothing it filled may answer
          done();
        },
      });
    }
  }

  private serve(reads: PendingRead[]): void {
    const now = this.now();
    for (const { db, key, waiter } of reads) if (!this.serveOne(db, key, waiter, now)) this.passOn(waiter);
  }

  /** A read answered from its entry, or joined to (or starting) its key's fill; false: the node must answer it. */
  private serveOne(db: number, key: Buffer, waiter: CacheWaiter, now: number): boolean {
    const entry = this.store.get(db, key, now);
    if (entry === undefined) return this.readMissing(db, key, waiter);
    this.counters.hits++;
    waiter.answer(replyFor(entry.value, waiter.kind, waiter.fields, waiter.protocol));
    return true;
  }

  private reads: PendingRead[] = [];

  private readMissing(db: number, key: Buffer, waiter: CacheWaiter): boolean {
    const name = entryName(db, key);
    // A write of the key in flight: a fill on the tracking connection could run before it on the
    // node, and answer a read that came after it with the value before. The node answers instead,
    // behind the write on the client's link.
    if (this.writingEverything > 0 || this.writing.has(name)) return false;
    const inFlight = this.fills.get(name);
    if (inFlight !== undefined) {
      this.counters.coalesced++;
      inFlight.waiters.push(waiter);
      return true;
    }
    const node = this.nodeFor(key);
    if (node === null) return false;
    const conn = this.connection(node, db);
    this.counters.misses++;
    const command = fillCommand(waiter.kind);
    const fill: Fill = { name, key: Buffer.from(key), db, node, command, keep: true, waiters: [waiter] };
    this.fills.set(name, fill);
    this.counters.fills++;
    // A connection being opened: the fill (and every read that joins it) waits for it.
    if (conn instanceof Promise) void conn.then((open) => (open === null ? this.fillFailed(fill) : this.sendFill(fill, open)));
    else this.sendFill(fill, conn);
    return true;
  }

  private sendFill(fill: Fill, conn: LeasedConnection): void {
    const command = fill.command;
    let value: Buffer | null = null;
    conn.send(encodeCommand([command[0]!, fill.key, ...command.slice(1)]), {
      sentAt: 0,
      onReply: (frame) => {
        value = Buffer.from(frame);
      },
      onLinkFailure: () => this.fillFailed(fill),
    });
    conn.send(encodeCommand(['PTTL', fill.key]), {
      sentAt: 0,
      onReply: (frame) => this.filled(fill, value!, frame),
      onLinkFailure: () => this.fillFailed(fill),
    });
  }

  /**
   * A write through respool is about to be sent: its keys' entries go now, and until endWrite
   * nothing read of them is kept. `keys` null: every key (a flush).
   */
  beginWrite(db: number, keys: Buffer[] | null): WriteMark | null {
    if (keys === null) {
      this.coalescing?.forgetAll();
      this.writingEverything++;
      this.store.dropWhere();
      for (const fill of this.fills.values()) this.detach(fill);
      return { names: null };
    }
    let names: string[] | null = null;
    for (const key of keys) {
      this.coalescing?.forget(entryName(db, key));
      if (!this.matches(key)) continue;
      this.store.dropKey(key);
      const name = entryName(db, key);
      const fill = this.fills.get(name);
      if (fill !== undefined) this.detach(fill);
      this.writing.set(name, (this.writing.get(name) ?? 0) + 1);
      (names ??= []).push(name);
    }
    return names === null ? null : { names };
  }

  /** The write's reply arrived (or it failed): fills started from now on may be kept. */
  endWrite(mark: WriteMark): void {
    if (mark.names === null) {
      this.writingEverything--;
      return;
    }
    for (const name of mark.names) {
      const n = this.writing.get(name)! - 1;
      if (n <= 0) this.writing.delete(name);
      else this.writing.set(name, n);
    }
  }

  /** RESPOOL CACHE FLUSH: every entry dropped; the count. */
  flush(): number {
    for (const fill of this.fills.values()) this.detach(fill);
    return this.store.dropWhere();
  }

  stats(): Record<string, number> {
    const { hits, misses, coalesced } = this.counters;
    const reads = hits + misses + coalesced;
    return {
      entries: this.store.size,
      bytes: this.store.bytes,
      max_bytes: this.settings.maxBytes,
      hits,
      misses,
      hit_ratio: reads === 0 ? 0 : Math.round((hits / reads) * 10_000) / 10_000,
      fills: this.counters.fills,
      coalesced,
      invalidations: this.counters.invalidations,
      evictions: this.store.evictions,
      passed_on: this.counters.passedOn,
      confirms: this.counters.confirms,
      tracking_connections: [...this.conns.values()].filter((c) => !(c instanceof Promise)).length,
      hot_keys: this.hotKeys.size,
      coalesced_uncached: this.coalescing?.joined ?? 0,
    };
  }

  /** The `count` most recently used entries, most recent first (RESPOOL CACHE KEYS, GET /cache). */
  recentEntries(count: number): CacheEntry[] {
    return [...this.store.values()].reverse().slice(0, count);
  }

  /** The topology changed: entries whose node no longer owns their slot go. */
  onTopology(topology: Topology): void {
    if (topology.mode !== 'cluster') return;
    this.store.dropWhere((e) => topology.primaryForSlot(calculateSlot(e.key))?.address !== e.node);
  }

  close(): void {
    this.closed = true;
    this.flush();
    for (const conn of this.conns.values()) {
      if (!(conn instanceof Promise)) this.deps.dedicated.release(conn, false);
    }
    this.conns.clear();
  }

  private nodeFor(key: Buffer): string | null {
    const topology = this.deps.topology();
    if (topology === null) return null;
    const node = topology.mode === 'cluster' ? topology.primaryForSlot(calculateSlot(key)) : topology.shards[0]?.primary;
    return node === undefined ? null : node.address;
  }

  /** The tracking connection to node/db: open, or being opened (null once that failed). */
  private connection(node: string, db: number): LeasedConnection | Promise<LeasedConnection | null> {
    const id = `${node}/${db}`;
    const known = this.conns.get(id);
    if (known !== undefined) return known;
    const opening = this.open(node, db, id);
    this.conns.set(id, opening);
    void opening.then((conn) => {
      if (this.conns.get(id) !== opening) {
        if (conn !== null) this.deps.dedicated.release(conn, false);
        return;
      }
      if (conn === null) this.conns.delete(id);
      else this.conns.set(id, conn);
    });
    return opening;
  }

  private async open(node: string, db: number, id: string): Promise<LeasedConnection | null> {
    const at = node.lastIndexOf(':');
    const host = node.slice(0, at);
    const port = Number(node.slice(at + 1));
    let conn: LeasedConnection;
    try {
      conn = await this.deps.dedicated.acquire(host, port, 3, db, null);
    } catch (err) {
      this.deps.log.debug({ node, err: (err as Error).message }, 'near cache: no tracking connection');
      return null;
    }
    conn.setDeadline(this.deps.commandMs());
    const reply = await new Promise<Buffer | null>((resolve) => {
      conn.send(TRACKING_ON, { sentAt: 0, onReply: (frame) => resolve(Buffer.from(frame)), onLinkFailure: () => resolve(null) });
    });
    if (reply === null || reply[0] !== 0x2b /* + */ || this.closed) {
      if (reply !== null && reply[0] !== 0x2b) this.deps.log.warn({ node, reply: reply.toString('latin1', 0, 120).trim() }, 'near cache: CLIENT TRACKING ON refused; the node\'s keys are not cached');
      this.deps.dedicated.release(conn, false);
      return null;
    }
    conn.onPush = (frame) => this.invalidated(node, frame);
    conn.once('close', () => this.lost(id, node, conn));
    return conn;
  }

  /** An invalidation from `node`: the keys it names leave (every key of the node for a null list). */
  private invalidated(node: string, frame: Buffer): void {
    const keys = invalidatedKeys(frame);
    if (keys === undefined) return; // not an invalidation
    this.counters.invalidations++;
    if (keys === null) {
      this.dropNode(node);
      return;
    }
    for (const key of keys) {
      this.store.dropKey(key);
      for (const fill of this.fills.values()) if (fill.key.equals(key)) this.detach(fill);
    }
  }

  /** A tracking connection closed: nothing it filled can be invalidated any more. */
  private lost(id: string, node: string, conn: LeasedConnection): void {
    if (this.conns.get(id) === conn) this.conns.delete(id);
    this.deps.dedicated.release(conn, false);
    this.dropNode(node);
  }

  private dropNode(node: string): void {
    this.store.dropWhere((e) => e.node === node);
    for (const fill of this.fills.values()) if (fill.node === node) this.detach(fill);
  }

  /** The fill can no longer be kept, and later reads do not join it. */
  private detach(fill: Fill): void {
    fill.keep = false;
    if (this.fills.get(fill.name) === fill) this.fills.delete(fill.name);
  }

  private filled(fill: Fill, reply: Buffer, pttl: Buffer): void {
    this.detachIfCurrent(fill);
    const value = valueOf(fill.command, reply);
    if (value === null) {
      // WRONGTYPE answers the reads of the fill's own family (GET, STRLEN; or the hash reads); anything
      // else (MOVED, LOADING, NOPERM …), and the other reads, the node answers itself.
      const wrongType = isWrongType(reply);
      for (const w of fill.waiters) {
        if (wrongType && w.kind === 'mgetpart') w.answer(nil(w.protocol)); // MGET's nil for a key of another type
        else if (wrongType && sharesFill(w.kind, fill.command)) w.answer(reply);
        else this.passOn(w);
      }
      return;
    }
    // Kept before its reads are answered: an answer can let the client's next request run at
    // once — a write held behind these reads (handlers/index.ts) — whose mark must find the entry.
    const ms = pttl[0] === 0x3a ? Number(pttl.toString('latin1', 1, pttl.length - 2)) : -1;
    // A key that expired between the read and PTTL (-2 with a value) is not kept.
    if (fill.keep && !this.closed && !(ms === -2 && value.type !== 'none')) {
      const now = this.now();
      this.store.put({ key: fill.key, db: fill.db, node: fill.node, value, expiresAt: ms > 0 ? now + ms : 0, filledAt: now });
    }
    for (const w of fill.waiters) w.answer(replyFor(value, w.kind, w.fields, w.protocol));
  }

  private fillFailed(fill: Fill): void {
    if (fill.waiters.length === 0) return;
    this.detachIfCurrent(fill);
    const waiters = fill.waiters.splice(0);
    for (const w of waiters) this.passOn(w);
  }

  private detachIfCurrent(fill: Fill): void {
    if (this.fills.get(fill.name) === fill) this.fills.delete(fill.name);
  }

  private passOn(w: CacheWaiter): void {
    this.counters.passedOn++;
    w.passOn();
  }
}
