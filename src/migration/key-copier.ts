import { NodeError, type MigrationSide } from './migration-side.js';
import { copyInParts, partsName } from './copy-in-parts.js';
import { RespError, type RespValue } from '../resp/decode.js';

/** What a copy of a key is for: the scan's first copy, a write respool carries, or a repair (a failed copy's, a difference the verifier found). */
export type CopyReason = 'scan' | 'write' | 'repair';

export interface CopyCounts {
  /** Keys the scan copied (each once). */
  copied: number;
  /** Writes carried to the target (each by a copy of the keys it wrote). */
  mirrored: number;
  /** Copies beyond a key's first: a write's, or a verifier's repair. */
  recopied: number;
  /** Keys gone from the source when copied: deleted on the target. */
  deleted: number;
  /** DUMP payload bytes restored on the target. */
  bytes: number;
}

/** A confirmed copy reads the source again at most this many times before it gives the key up (KeyKeptChanging). */
const MAX_CONFIRMS = 50;

/**
 * Writes' keys are gathered this long, then copied together: their DUMPs reach the source in one
 * write and their RESTOREs the target in one, so a node wakes once for several rather than once
 * for each (bench/migration.mjs part 4: respool's CPU per carried write +27 µs → +12 µs).
 */
export const CARRY_GATHER_MS = 5;

/** A key written faster than a confirmed copy could catch it: left to a later copy (the migration's keys to copy). */
export class KeyKeptChanging extends Error {}

/** A key of a database as one string: the name copies in flight (and the migration's keys to copy) are kept under. */
export function keyName(db: number, key: Buffer): string {
  return `${db}\u0000${key.toString('latin1')}`;
}

/** A key's copies: one running, and whether another must follow it (a write came meanwhile). */
interface KeyCopies {
  again: boolean;
  /** Resolve when the last copy asked for so far is on the target. */
  waiters: Array<{ resolve: () => void; reject: (err: Error) => void }>;
  /** Resolve when the copy running now ends (settled()). */
  settled: Array<() => void>;
}

/**
 * Copies keys from the source to the target — DUMP + PTTL on the source's owner, RESTORE …
 * REPLACE ABSTTL (or DEL, for a key that is gone) on the target's — one copy of a key at a time.
 *
 * Why no write is lost: a write acknowledged by the source asks for a copy of each key it wrote
 * (copy()). Copies of one key never overlap: one asked for while another runs runs after it
 * (`again`), and its DUMP is sent after the write's acknowledgement. So the key's last copy reads a
 * source that holds every acknowledged write, and REPLACE puts that on the target whatever an
 * earlier copy left there — whether the writes were SET, INCR or a script, and in whatever order
 * the source's links ran them.
 *
 * Several processes (workers) each carry their own clients' writes with a copier of their own, so
 * copies of one key may overlap across them: a copier then confirms each copy (`confirm`): after
 * its RESTORE (or DEL) it reads the source again and copies once more unless the source still holds
 * what it put there. Whatever RESTORE lands last on the target is followed by its copier's read of
 * the source; any write after that read asks for a copy that lands later still — so the last
 * RESTORE holds the source's last value. (A copy in parts builds a name of its own and RENAMEs
 * it at the end: one command on the target, as RESTORE is.)
 *
 *   gathered : keyName → a written key whose copy starts within CARRY_GATHER_MS (each key once)
 *   running  : keyName → KeyCopies, at most one copy per key in flight (in this process)
 *   idle     : resolves when nothing is gathered and no copy runs (a cutover waits for it)
 */
export class KeyCopier {
  readonly counts: CopyCounts = { copied: 0, mirrored: 0, recopied: 0, deleted: 0, bytes: 0 };
  private readonly running = new Map<string, KeyCopies>();
  private readonly gathered = new Map<string, { db: number; key: Buffer }>();
  private gatherTimer: NodeJS.Timeout | null = null;
  private idleWaiters: Array<() => void> = [];
  /** Stopped (ABORT, the end of a rollback window): no copy starts any more. */
  private stopped = false;

  constructor(
    private readonly source: MigrationSide,
    private readonly target: MigrationSide,
    /** A copy failed on the target or source (the migration pauses): the node's words. */
    private readonly onFailure: (db: number, key: Buffer, error: Error) => void,
    /** A DUMP payload bigger than this is not RESTOREd whole: the key is copied in parts (copy-in-parts.ts). */
    private readonly maxPayloadBytes = Number.POSITIVE_INFINITY,
    /** Other processes copy the same keys: each copy confirmed against the source (PEXPIRETIME, Redis/Valkey ≥ 7). */
    private readonly confirm = false,
  ) {}

  /** Copies in flight now, and written keys about to be copied. */
  get inFlight(): number {
    return this.running.size + this.gathered.size;
  }

  /**
   * A write the source acknowledged wrote this key: it is copied within CARRY_GATHER_MS, together
   * with the other keys written meanwhile (a key written twice meanwhile is copied once: the copy
   * starts after both acknowledgements). A failure goes to onFailure.
   */
  carry(db: number, key: Buffer): void {
    if (this.stopped) return;
    this.counts.mirrored++;
    const name = keyName(db, key);
    if (!this.gathered.has(name)) this.gathered.set(name, { db, key: Buffer.from(key) });
    this.gatherTimer ??= setTimeout(() => this.flush(), CARRY_GATHER_MS);
  }

  /** Starts the gathered keys' copies now (a cutover's drain does not wait for the timer). */
  flush(): void {
    if (this.gatherTimer !== null) clearTimeout(this.gatherTimer);
    this.gatherTimer = null;
    const keys = [...this.gathered.values()];
    this.gathered.clear();
    for (const { db, key } of keys) void this.copy(db, key, 'write').catch(() => undefined);
  }

  /** Copies the key (again, if a copy runs: after it). Resolves when a copy started after this call is on the target. */
  copy(db: number, key: Buffer, reason: CopyReason): Promise<void> {
    if (this.stopped) return Promise.reject(new NodeError('the migration ended'));
    if (reason === 'scan') this.counts.copied++; // the scan reached it: counted once, whichever copy carries it
    const name = keyName(db, key);
    const copies = this.running.get(name);
    return new Promise((resolve, reject) => {
      if (copies !== undefined) {
        copies.again = true;
        copies.waiters.push({ resolve, reject });
        return;
      }
      const fresh: KeyCopies = { again: false, waiters: [{ resolve, reject }], settled: [] };
      this.running.set(name, fresh);
      void this.run(name, db, Buffer.from(key), fresh, reason);
    });
  }

  /** No copy starts from now on (those asked for fail); resolves once the running ones ended. */
  stop(): Promise<void> {
    this.stopped = true;
    if (this.gatherTimer !== null) clearTimeout(this.gatherTimer);
    this.gatherTimer = null;
    this.gathered.clear();
    return this.idle();
  }

  /** Resolves once no copy runs. */
  idle(): Promise<void> {
    if (this.gathered.size > 0) this.flush(); // no reason to wait for the timer
    if (this.running.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /** Resolves when the key's copy running now (if any) is done: the verifier compares keys at rest. */
  settled(db: number, key: Buffer): Promise<void> {
    if (this.gathered.has(keyName(db, key))) this.flush();
    const copies = this.running.get(keyName(db, key));
    if (copies === undefined) return Promise.resolve();
    return new Promise((resolve) => copies.settled.push(resolve));
  }

  private async run(name: string, db: number, key: Buffer, copies: KeyCopies, reason: CopyReason): Promise<void> {
    for (let first = true; ; first = false) {
      const waiters = copies.waiters.splice(0);
      copies.again = false;
      try {
        await this.copyOnce(db, key, first ? reason : 'repair');
        for (const w of waiters) w.resolve();
      } catch (err) {
        this.onFailure(db, key, err as Error);
        for (const w of waiters) w.reject(err as Error);
      }
      for (const resolve of copies.settled.splice(0)) resolve();
      if (!copies.again) break;
      if (this.stopped) {
        for (const w of copies.waiters.splice(0)) w.reject(new NodeError('the migration ended'));
        break;
      }
    }
    this.running.delete(name);
    if (this.running.size === 0) for (const resolve of this.idleWaiters.splice(0)) resolve();
  }

  /** One copy: the source's value and expiry now, put on the target in place of what it had (confirmed, when asked). */
  private async copyOnce(db: number, key: Buffer, reason: CopyReason): Promise<void> {
    if (reason !== 'scan') this.counts.recopied++;
    if (!this.confirm) {
      const [payload, pttl] = await Promise.all([this.source.callFor(key, db, ['DUMP', key]), this.source.callFor(key, db, ['PTTL', key])]);
      const ttl = typeof pttl === 'number' && pttl > 0 ? Date.now() + pttl : 0;
      await this.put(db, key, payload, pttl === -2 ? null : ttl, false);
      return;
    }
    let read = await this.readSource(db, key);
    for (let n = 0; n < MAX_CONFIRMS; n++) {
      await this.put(db, key, read.payload, read.expireAt, true);
      const again = await this.readSource(db, key);
      if (sameRead(read, again)) return;
      read = again;
    }
    throw new KeyKeptChanging(`the key changed during each of ${MAX_CONFIRMS} copies`);
  }

  /** DUMP and PEXPIRETIME (an absolute time: two reads of an unchanged key agree). */
  private async readSource(db: number, key: Buffer): Promise<{ payload: RespValue; expireAt: number }> {
    const [payload, at] = await Promise.all([this.source.callFor(key, db, ['DUMP', key]), this.source.callFor(key, db, ['PEXPIRETIME', key])]);
    return { payload, expireAt: typeof at === 'number' ? at : -1 };
  }

  /**
   * Puts one read of the source on the target: RESTORE … REPLACE [ABSTTL], or DEL for a key that
   * is gone (null payload, or `expireAt` null / -2), or a copy in parts for a payload too big.
   */
  private async put(db: number, key: Buffer, payload: RespValue, expireAt: number | null, atomicParts: boolean): Promise<void> {
    if (payload === null || expireAt === null || expireAt === -2) {
      // Gone (deleted, expired, or expired between the two reads): gone on the target too.
      await this.target.callFor(key, db, ['DEL', key]);
      this.counts.deleted++;
      return;
    }
    if (!Buffer.isBuffer(payload)) throw new NodeError(`DUMP answered ${String(payload)}`);
    const ttl = expireAt > 0 ? expireAt : 0;
    if (payload.length > this.maxPayloadBytes) {
      const into = atomicParts ? partsName(key, this.target.isCluster) : null;
      const bytes = await copyInParts(this.source, this.target, db, key, ttl, into);
      this.counts.bytes += bytes; // after the await: `+= await` would add to the count as it was before it
      return;
    }
    await this.target.callFor(key, db, ttl > 0 ? ['RESTORE', key, ttl, payload, 'REPLACE', 'ABSTTL'] : ['RESTORE', key, 0, payload, 'REPLACE']);
    this.counts.bytes += payload.length;
  }
}

function sameRead(a: { payload: RespValue; expireAt: number }, b: { payload: RespValue; expireAt: number }): boolean {
  if (a.expireAt !== b.expireAt) return false;
  if (Buffer.isBuffer(a.payload) && Buffer.isBuffer(b.payload)) return a.payload.equals(b.payload);
  return a.payload === null && b.payload === null;
}

/** Whether two replies are the same value (the verifier's comparison of logical reads). */
export function sameValue(a: RespValue, b: RespValue): boolean {
  if (a instanceof RespError || b instanceof RespError) return false;
  if (Buffer.isBuffer(a) && Buffer.isBuffer(b)) return a.equals(b);
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((x, i) => sameValue(x, b[i]!));
  return a === b || String(a) === String(b);
}
