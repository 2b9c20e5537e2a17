/**
 * The near cache's entries (nearcache/near-cache.ts decides what goes in and when it leaves):
 * a byte-bounded LRU of values (cached-value.ts), keyed by database and the key as the node stores it.
 *
 *   order     : a Map's insertion order is the LRU order — a hit moves its entry to the end,
 *               eviction takes from the front
 *   bound     : bytes = Σ (key + value + ENTRY_OVERHEAD) ≤ maxBytes after every put; a value over
 *               maxEntryBytes is never stored
 *   lifetime  : an entry leaves when dropped (an invalidation, a write through respool, its node's
 *               tracking connection lost), when its key's TTL passes, when it is older than
 *               maxAgeMs, or when evicted; nothing else changes an entry
 */

import { valueBytes, type CachedValue } from './cached-value.js';

/** Bytes an entry costs beyond its key and value (the Map slot, the object, its fields). */
export const ENTRY_OVERHEAD = 96;

export interface CacheEntry {
  readonly key: Buffer;
  readonly db: number;
  /** The node whose tracking connection filled it ("host:port"): its loss drops the entry. */
  readonly node: string;
  /** What the key held when it was read (cached-value.ts). */
  readonly value: CachedValue;
  /** When the node's TTL ends it (Date.now() ms), or 0 for none. */
  readonly expiresAt: number;
  readonly filledAt: number;
  readonly bytes: number;
}

export interface CacheLimits {
  maxBytes: number;
  maxEntryBytes: number;
  /** An entry is not served past this age (ms); 0: no bound. */
  maxAgeMs: number;
}

export function entryName(db: number, key: Buffer): string {
  return db === 0 ? key.toString('latin1') : `${db}\u0000${key.toString('latin1')}`;
}

export class CacheStore {
  private readonly entries = new Map<string, CacheEntry>();
  private used = 0;
  evictions = 0;

  constructor(private readonly limits: CacheLimits) {}

  get size(): number {
    return this.entries.size;
  }

  get bytes(): number {
    return this.used;
  }

  /** The entry for db/key when it may still be served (moved to the LRU end), else undefined. */
  get(db: number, key: Buffer, now: number): CacheEntry | undefined {
    const name = entryName(db, key);
    const entry = this.entries.get(name);
    if (entry === undefined) return undefined;
    if ((entry.expiresAt !== 0 && now >= entry.expiresAt) || (this.limits.maxAgeMs > 0 && now - entry.filledAt >= this.limits.maxAgeMs)) {
      this.remove(name, entry);
      return undefined;
    }
    this.entries.delete(name);
    this.entries.set(name, entry);
    return entry;
  }

  /** Stores an entry (replacing any for its key); false when it is over maxEntryBytes. */
  put(fields: Omit<CacheEntry, 'bytes'>): boolean {
    const bytes = fields.key.length + valueBytes(fields.value) + ENTRY_OVERHEAD;
    if (bytes > this.limits.maxEntryBytes || bytes > this.limits.maxBytes) return false;
    const name = entryName(fields.db, fields.key);
    const old = this.entries.get(name);
    if (old !== undefined) this.remove(name, old);
    this.evictTo(this.limits.maxBytes - bytes);
    this.entries.set(name, { ...fields, bytes });
    this.used += bytes;
    if (fields.db !== 0) this.otherDbEntries++;
    return true;
  }

  /** Drops the key in every database (an invalidation names a key, not a database); the count dropped. */
  dropKey(key: Buffer): number {
    if (this.entries.size === 0) return 0;
    let dropped = 0;
    const plain = key.toString('latin1');
    const entry = this.entries.get(plain);
    if (entry !== undefined) {
      this.remove(plain, entry);
      dropped++;
    }
    if (this.hasOtherDatabases) {
      for (const [name, e] of this.entries) {
        if (e.db !== 0 && e.key.equals(key)) {
          this.remove(name, e);
          dropped++;
        }
      }
    }
    return dropped;
  }

  /** Drops every entry `which` selects (all when omitted); the count dropped. */
  dropWhere(which?: (entry: CacheEntry) => boolean): number {
    let dropped = 0;
    for (const [name, entry] of this.entries) {
      if (which === undefined || which(entry)) {
        this.remove(name, entry);
        dropped++;
      }
    }
    return dropped;
  }

  /** Entries from the least to the most recently used. */
  values(): IterableIterator<CacheEntry> {
    return this.entries.values();
  }

  private get hasOtherDatabases(): boolean {
    return this.otherDbEntries > 0;
  }

  /** Entries outside database 0: dropKey scans for them only when there are some. */
  private otherDbEntries = 0;

  private remove(name: string, entry: CacheEntry): void {
    this.entries.delete(name);
    this.used -= entry.bytes;
    if (entry.db !== 0) this.otherDbEntries--;
  }

  private evictTo(target: number): void {
    for (const [name, entry] of this.entries) {
      if (this.used <= target) return;
      this.remove(name, entry);
      this.evictions++;
    }
  }
}
