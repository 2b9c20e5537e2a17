/**
 * respool's tracking table: Valkey's TrackingTable (tracking.c) for the keys CLIENT TRACKING
 * clients (default mode, not BCAST) read through respool, and which clients read each, bounded by
 * `tracking-table-max-keys` as one server bounds its own.
 *
 * Why respool keeps one: each node tracks the keys of its own slots, so the nodes' limit is per
 * node — with `tracking-table-max-keys 1` a 3-primary cluster keeps 3 keys tracked where one
 * server keeps 1, and a client that waits for the evicted keys' invalidations waits for ever.
 * The limit is respool's (CONFIG GET/SET answer it: handlers/node-settings.ts); the nodes keep
 * their own (RESPOOL NODE … CONFIG SET to change one).
 *
 *   key        the key as the node stores it (a namespace's prefix included), latin1; tracking
 *              clients are in database 0 (handlers/index.ts), so a name is one key.
 *   remember   a read-only command sent on a tracking lane (as Valkey's call() does:
 *              trackingRememberKeys, OPTIN/OPTOUT and CACHING as Valkey decides): its keys, this
 *              reader; then the table is brought back under the limit.
 *   forget     an invalidation the node sent for a key (the key changed, the node forgets who
 *              read it: so does respool), or "every key" (flush, lost lane): the reader's keys;
 *              a FLUSHALL / FLUSHDB sent through respool: every key, as it is sent (the nodes'
 *              "invalidate everything" reaches each reader a moment later).
 *   evict      over the limit, the oldest keys first (Valkey evicts random ones): each reader of
 *              the key is sent `invalidate <key>` as Valkey's trackingLimitUsedSlots sends it.
 *
 * Invariants: `readers` and each reader's `keys` are two views of one relation (a key is in a
 * reader's set exactly when the reader is in the key's); no key has an empty reader set;
 * `keys.size` ≤ maxKeys after every public call (0 = no limit, as Valkey).
 *
 * Not seen by respool, so neither counted nor evicted: keys a script reads (the node tracks them)
 * and reads inside MULTI … EXEC; a key respool evicted stays tracked on its node until it changes,
 * so the client may get a second invalidation for it then (never a stale value).
 */

/** A tracking client as the table sees it (client/tracking-lanes.ts). */
export interface TrackedKeyReader {
  /** The keys this reader has in the table (kept by the table). */
  readonly trackedKeys: Set<string>;
  /** `key` (a stored name) was evicted: the reader gets Valkey's invalidation for it. */
  evicted(key: Buffer): void;
}

/** Valkey's default tracking-table-max-keys. */
const DEFAULT_TRACKING_TABLE_MAX_KEYS = 1_000_000;

export class TrackedKeys {
  /** tracking-table-max-keys: 0 = no limit. */
  private max = DEFAULT_TRACKING_TABLE_MAX_KEYS;
  private readonly readers = new Map<string, Set<TrackedKeyReader>>();
  /** Every (key, reader) pair: Valkey's tracking_total_items. */
  private items = 0;

  get maxKeys(): number {
    return this.max;
  }

  /** CONFIG SET tracking-table-max-keys: keys over a lower limit are evicted once its reply is out (Valkey: at the next command or cron). */
  setMaxKeys(max: number): void {
    this.max = max;
    setImmediate(() => this.evictOverLimit());
  }

  /** Keys in the table (Valkey's tracking_total_keys). */
  get keyCount(): number {
    return this.readers.size;
  }

  /** (key, reader) pairs (Valkey's tracking_total_items). */
  get itemCount(): number {
    return this.items;
  }

  /** `reader` read `keys` (stored names; kept as strings, never as the buffers): remembered, then the table is brought under the limit. */
  remember(reader: TrackedKeyReader, keys: readonly Buffer[]): void {
    for (const key of keys) {
      const name = key.toString('latin1');
      let set = this.readers.get(name);
      if (set === undefined) this.readers.set(name, (set = new Set()));
      if (set.has(reader)) continue;
      set.add(reader);
      reader.trackedKeys.add(name);
      this.items++;
    }
    this.evictOverLimit();
  }

  /** The node invalidated `key` for `reader`: it no longer tracks it. */
  forget(reader: TrackedKeyReader, key: Buffer): void {
    const name = key.toString('latin1');
    if (!reader.trackedKeys.delete(name)) return;
    this.unlink(name, reader);
  }

  /** Every key of `reader` (flush, lost lane, tracking off or closed). */
  forgetReader(reader: TrackedKeyReader): void {
    for (const name of reader.trackedKeys) this.unlink(name, reader);
    reader.trackedKeys.clear();
  }

  /** Before `command` runs, wherever it runs (handlers/index.ts route, a transaction's piece): a flush forgets every tracked key. */
  noteCommand(command: string): void {
    if (command === 'flushall' || command === 'flushdb') this.forgetAll();
  }

  /** FLUSHALL / FLUSHDB: Valkey frees its whole table at any flush (tracking.c trackingInvalidateKeysOnFlush); the nodes send every reader "invalidate everything". */
  forgetAll(): void {
    for (const set of this.readers.values()) for (const reader of set) reader.trackedKeys.clear();
    this.readers.clear();
    this.items = 0;
  }

  private unlink(name: string, reader: TrackedKeyReader): void {
    const set = this.readers.get(name);
    if (set === undefined || !set.delete(reader)) return;
    this.items--;
    if (set.size === 0) this.readers.delete(name);
  }

  /** Oldest keys first until the table holds maxKeys; each reader of an evicted key is told. */
  private evictOverLimit(): void {
    if (this.max === 0) return;
    while (this.readers.size > this.max) {
      const [name, set] = this.readers.entries().next().value as [string, Set<TrackedKeyReader>];
      this.readers.delete(name);
      this.items -= set.size;
      const key = Buffer.from(name, 'latin1');
      for (const reader of set) {
        reader.trackedKeys.delete(name);
        reader.evicted(key);
      }
    }
  }
}
