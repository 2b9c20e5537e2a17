import type { Logger } from 'pino';
import { TransactionBlock } from '../routing/transaction-block.js';
import { internalCall } from '../routing/internal-call.js';
import type { Router } from '../routing/router.js';
import type { CallClient } from '../routing/upstream-call.js';
import { splitAggregate } from '../resp/decode.js';
import { encodeCommand, encodeError } from '../resp/encode.js';
import type { Metrics } from '../metrics/metrics.js';
import { clockNow } from '../util/read-clock.js';
import { putBackCommand } from './put-back.js';
import { KeyWatch, type KeyWatchOptions } from './key-watch.js';
import { KeyQueue } from './key-queue.js';
import { RetryLater } from './retry-later.js';
import { isNilReply, moveDestination, popForm, popsFromLeft, requestArgs } from './pop-forms.js';
import { Waiter, type ParkListener, type ParkTicket } from './waiter.js';

export type { ParkListener, ParkTicket } from './waiter.js';

/** What a client that would block asks for. */
export interface ParkRequest {
  readonly client: CallClient;
  /** Lower case: blpop, brpop, blmove, brpoplpush, blmpop, bzpopmin, bzpopmax, bzmpop (pop-forms.ts PARKABLE_POPS). */
  readonly command: string;
  /** The blocking command (copied: kept while the client waits). */
  readonly raw: Buffer;
  /**
   * The keys it waits on as latin1 text (binary-safe), in the command's order (all in `slot`):
   * BLMOVE's and BRPOPLPUSH's source only. The queues keep these very strings (the caller's too).
   */
  readonly keys: readonly string[];
  readonly slot: number;
}

type Queue = KeyQueue<Waiter>;

/**
 * How one try to pop for a waiter ended. `wrongType`: a key it waits on holds another type —
 * Valkey answers WRONGTYPE when the command arrives, but leaves a blocked client blocked.
 */
type Attempt = 'served' | 'empty' | 'wrongType' | 'retry';

/** Errors a node gives while it cannot serve the key now (failover, loading, a moving slot): try again later. */
const TRANSIENT = /^-(READONLY|LOADING|CLUSTERDOWN|TRYAGAIN|MASTERDOWN|MOVED|ASK)\b/;
const ZSET_POPS: ReadonlySet<string> = new Set(['bzpopmin', 'bzpopmax', 'bzmpop']);
/** Tries in a row that found the key holding data yet popped nothing (a moving slot): then wait. */
const MAX_RACES = 50;

const NIL = Buffer.from('*-1\r\n');

/**
 * Blocked clients parked at respool (issue 36): a client whose BLPOP, BRPOP, BLMOVE, BRPOPLPUSH,
 * BLMPOP, BZPOPMIN, BZPOPMAX or BZMPOP finds no data waits in respool's queue of each of its keys
 * — no connection of its own on the node — and one watch connection per node (key-watch.ts) hears
 * of every change to those keys.
 *
 *   queue    per database and key, in arrival order (key-queue.ts): the first waiter is served
 *            first, as Valkey serves its blocked clients; a client that named several keys waits
 *            in each queue (BLMOVE / BRPOPLPUSH: its source only).
 *   arrive   the command itself inside MULTI … EXEC on the client's shared link (where Valkey does
 *            not block): a value or an error (WRONGTYPE, a syntax error) is its reply; nil parks
 *            it. Its keys are registered on their node's watch at the same time.
 *   drain    of one key: its first waiter is served with the pop's non-blocking form over that key
 *            (pop-forms.ts: TYPE + LPOP … in one MULTI) while the key is registered again (EXISTS
 *            on the watch, sent at the same time); served → the next waiter; a key of another
 *            type → the next waiter (that one stays); nothing, and the key empty at registration →
 *            parked until the next change; nothing though the key held data (the two raced), or a
 *            change heard meanwhile → once more. One drain per key at a time. No lost wake: a
 *            change after the registration ran is pushed; one before it shows in its count.
 *   order    keys are served in the order they became ready (readySeq): a waiter on several keys
 *            is tried by the earliest; a waiter is tried by one drain at a time.
 *   writes   through respool to a waited-on key (wakeAfterWrite): the writer's reply waits for the
 *            drain; a BLMOVE that fed a waited-on key drains it before its own drain goes on.
 *   gone     a value popped for a client that left meanwhile is put back where it came from
 *            (put-back.ts: the same end, the same score), before its key's next waiter is tried;
 *            BLMOVE / BRPOPLPUSH moved it on the node, where it stays (as on Valkey).
 *   failure  a node that cannot be reached or is failing over: the key is tried again after a
 *            jittered, capped backoff, and registered on whichever node owns it then.
 */
export class ParkedPops {
  /** Key name (latin1) → its queue in the first database that has one (others chained by `next`). */
  private readonly queues = new Map<string, Queue>();
  private readonly watches = new Map<string, KeyWatch>();
  private readonly retrying = new RetryLater<Queue>((q) => void this.drain(q));
  private parkedCount = 0;
  private closed = false;
  /** Drains started so far: each drain's place in the order keys became ready. */
  private readySeq = 0;

  constructor(
    private readonly router: Router,
    private readonly watchOptions: (host: string, port: number) => KeyWatchOptions,
    private readonly log: Logger,
    private readonly metrics?: Metrics,
  ) {}

  /** Per node: the clients waiting on its keys (one on several keys of a node counts once) and whether its watch is open. */
  byNode(): Record<string, { clients: number; watch: boolean }> {
    const clients = new Map<string, Set<Waiter>>();
    for (const queue of this.allQueues()) {
      if (queue.node === null) continue;
      let set = clients.get(queue.node);
      if (set === undefined) clients.set(queue.node, (set = new Set()));
      for (const w of queue.waiters()) set.add(w);
    }
    const out: Record<string, { clients: number; watch: boolean }> = {};
    for (const address of new Set([...clients.keys(), ...this.watches.keys()])) {
      out[address] = { clients: clients.get(address)?.size ?? 0, watch: this.watches.get(address)?.closed === false };
    }
    return out;
  }

  /** Clients parked now. */
  get parked(): number {
    return this.parkedCount;
  }

  /** Parks `request`; `listener` gets its one reply (a value or an error) unless the ticket is cancelled first. */
  park(request: ParkRequest, listener: ParkListener): ParkTicket {
    const waiter = new Waiter(request.client, request.command, request.raw, request.slot, listener, this);
    const db = request.client.db;
    const queues: Queue[] = [];
    request.keys.forEach((name, i) => {
      if (request.keys.indexOf(name) < i) return; // BLPOP k k 0: one place
      queues.push(this.queueFor(db, name, request.slot, waiter));
    });
    waiter.queues = queues.length === 1 ? [queues[0]!] : queues; // one key: an array of one
    this.parkedCount++;
    this.metrics?.parkedClients.inc();
    waiter.checking = this.firstCheck(waiter);
    return waiter;
  }

  /** Whether any client is parked at all (the cheap test before waitsOn). */
  waitingOnAny(): boolean {
    return this.parkedCount > 0;
  }

  /** Whether a parked client waits on one of `keys` in `db`. */
  waitsOn(db: number, keys: readonly Buffer[]): boolean {
    for (const key of keys) {
      for (let q = this.queues.get(key.toString('latin1')) ?? null; q !== null; q = q.next) if (q.db === db && q.live > 0) return true;
    }
    return false;
  }

  /**
   * After a write through respool to `keys` (acknowledged by the node): the parked clients those
   * keys can serve are served before the writer hears back, as Valkey serves its blocked clients
   * before it answers the command that fed them. Null when no client waits on them.
   */
  wakeAfterWrite(db: number, keys: readonly Buffer[], fromDrain = false): Promise<void> | null {
    if (this.queues.size === 0) return null;
    let drains: Array<Promise<void>> | null = null;
    for (const key of keys) {
      for (let q = this.queues.get(key.toString('latin1')) ?? null; q !== null; q = q.next) {
        if (q.db !== db || q.live === 0) continue;
        // A drain feeding a key whose drain already runs (its own, or one up the chain that waits
        // for this one): that one goes round again; waiting for it would wait for itself.
        if (fromDrain && q.running !== null) {
          q.changes++;
          q.again = true;
          continue;
        }
        (drains ??= []).push(this.changed(q));
      }
    }
    return drains === null ? null : Promise.all(drains).then(() => {});
  }

  /** Runs `then` once the clients parked on `keys` (written now) are served: a writer's reply waits for them. */
  afterServing(db: number, keys: readonly Buffer[], then: () => void): void {
    const served = this.wakeAfterWrite(db, keys);
    if (served === null) then();
    else void served.then(then);
  }

  /** Every parked key may have changed without a push (SWAPDB): each is tried again. */
  everythingChanged(): void {
    for (const queue of this.allQueues()) this.changed(queue);
  }

  /** The slots' owners may have moved (a failover, a reshard): keys registered elsewhere than their owner now are tried and registered there. */
  onTopology(): void {
    for (const queue of this.allQueues()) {
      if (queue.node !== null && queue.node !== this.router.primaryFor(queue.slot)?.address) this.changed(queue);
    }
  }

  close(): void {
    this.closed = true;
    this.retrying.close();
    for (const watch of this.watches.values()) watch.close(); // each reports itself lost (onLost: counted down)
  }

  /** The waiter leaves every queue (served, cancelled or gone). */
  leave(waiter: Waiter): void {
    if (waiter.done) return;
    waiter.done = true;
    this.parkedCount--;
    this.metrics?.parkedClients.dec();
    for (const queue of waiter.queues) {
      queue.removed();
      if (queue.live === 0 && queue.running === null) this.drop(queue);
    }
  }

  // ---- queues -----------------------------------------------------------------------------------

  /** `waiter`'s place at the end of the queue of `key` in `db` (a new queue when none waits there yet). */
  private queueFor(db: number, name: string, slot: number, waiter: Waiter): Queue {
    const first = this.queues.get(name) ?? null;
    for (let q = first; q !== null; q = q.next) {
      if (q.db !== db) continue;
      q.add(waiter);
      return q;
    }
    const queue: Queue = new KeyQueue(db, name, slot, waiter);
    queue.next = first;
    this.queues.set(name, queue);
    return queue;
  }

  private drop(queue: Queue): void {
    this.retrying.delete(queue);
    const first = this.queues.get(queue.name) ?? null;
    if (first === queue) {
      if (queue.next === null) this.queues.delete(queue.name);
      else this.queues.set(queue.name, queue.next);
      return;
    }
    for (let q = first; q !== null; q = q.next) {
      if (q.next === queue) {
        q.next = queue.next;
        return;
      }
    }
  }

  private *allQueues(): Generator<Queue> {
    for (const first of [...this.queues.values()]) for (let q: Queue | null = first; q !== null; q = q.next) yield q;
  }

  private changed(queue: Queue): Promise<void> {
    queue.changes++;
    if (queue.changedAt === 0) queue.changedAt = clockNow();
    return this.drain(queue);
  }

  /**
   * What the command gives when it arrives: one try of the command itself — a value, or the error
   * Valkey answers then (WRONGTYPE, a syntax error …) — while every key is registered on its
   * node's watch. Nothing to pop: the client is parked. A change heard meanwhile, or a key that
   * held data when registered (the two raced): that key is drained now.
   */
  private async firstCheck(waiter: Waiter): Promise<void> {
    const seen = waiter.queues.map((q) => q.changes);
    const registered = Promise.all(waiter.queues.map((q) => this.register(q)));
    const outcome = await this.attempt(waiter, waiter.queues[0]!, true);
    const held = await registered;
    waiter.checking = null;
    if (waiter.gone && !waiter.done && waiter.inflight === null) this.leave(waiter); // it went during the check
    if (waiter.done) return;
    if (!waiter.gone) waiter.listener.waiting(); // blocked from now on, as INFO and CLIENT LIST show it
    waiter.queues.forEach((queue, i) => {
      if (held[i] === null || outcome === 'retry') this.retryLater(queue);
      else if (queue.changes !== seen[i] || held[i] === true) void this.drain(queue);
    });
  }

  // ---- serving a key ----------------------------------------------------------------------------

  /** Serves the key's waiters in order while it holds data for them; resolves when done (a drain already running: when that one is). */
  private drain(queue: Queue): Promise<void> {
    if (queue.running !== null) {
      queue.again = true;
      return queue.running;
    }
    queue.readySeq = ++this.readySeq;
    const running = this.serveQueue(queue).finally(() => {
      queue.running = null;
      if (queue.live === 0) this.drop(queue);
    });
    queue.running = running;
    return running;
  }

  private async serveQueue(queue: Queue): Promise<void> {
    let races = 0;
    /** Kinds of pop the key held another type for, in this pass: their waiters are passed over. */
    let skipZsetPops = false;
    let skipListPops = false;
    for (;;) {
      if (queue.again) skipZsetPops = skipListPops = false; // it changed since: its type may have too
      queue.again = false;
      const head = queue.first((w) => !(ZSET_POPS.has(w.command) ? skipZsetPops : skipListPops));
      if (head === null || this.closed) break;
      if (head.checking !== null || head.inflight !== null) {
        // Its first check runs, or another key's drain tries it: see what that left. (A write
        // that arrived during a first check thus waits for it, and serves the client after.)
        await (head.checking ?? head.inflight);
        continue;
      }
      // The head also waits on a key that became ready earlier: that key serves it first, as
      // Valkey serves ready keys in order (BLMPOP … k1 k2 with both pushed in one EXEC: from k1).
      const earlier = this.earlierDrain(head, queue);
      if (earlier !== null) {
        await earlier;
        continue;
      }
      // The key registered again (its last change's invalidation ended the node's tracking of it)
      // while the first waiter is tried: one round trip, both at once.
      const registered = this.register(queue);
      const outcome = await this.attempt(head, queue, false);
      const holdsData = await registered;
      if (outcome === 'retry') return this.retryLater(queue);
      if (outcome === 'served') {
        races = 0;
        if (head.inflight !== null) await head.inflight; // its value going back: before the next waiter's try
        // BLMOVE / BRPOPLPUSH fed their destination: its waiters are served too, before this ends.
        const destination = moveDestination(head.command, requestArgs(head.raw));
        if (destination !== null) await this.wakeAfterWrite(queue.db, [destination], true);
        continue;
      }
      if (holdsData === null) return this.retryLater(queue); // not registered: no change would be heard
      if (outcome === 'wrongType') {
        // The key holds another type: none of this kind of pop can be served from it now (one
        // try, not one per waiter), the others are tried (BZPOPMIN waiters behind BLPOP ones).
        if (ZSET_POPS.has(head.command)) skipZsetPops = true;
        else skipListPops = true;
        continue;
      }
      if (!holdsData && !queue.again) break; // empty, and registered: parked until its next change
      // Nil though the key held data: a change raced the registration; again, within a bound.
      if (++races >= MAX_RACES) return this.retryLater(queue);
    }
    this.retrying.settled();
    queue.changedAt = 0;
  }

  /** The drain of another of `waiter`'s keys that became ready before `queue`'s, if one runs. */
  private earlierDrain(waiter: Waiter, queue: Queue): Promise<void> | null {
    if (waiter.queues.length === 1) return null;
    for (const q of waiter.queues) if (q !== queue && q.running !== null && q.readySeq < queue.readySeq) return q.running;
    return null;
  }

  /** Registers the key on its node's watch: whether it held data then, or null when that failed. */
  private async register(queue: Queue): Promise<boolean | null> {
    const node = this.router.primaryFor(queue.slot);
    if (node === undefined) return null;
    let watch = this.watches.get(node.address);
    if (watch === undefined || watch.closed) {
      watch = new KeyWatch(this.watchOptions(node.host, node.port), (keys) => this.onChange(node.address, keys), (lost) => this.onLost(lost));
      this.watches.set(node.address, watch);
      this.metrics?.parkWatchConnections.inc();
    }
    queue.node = node.address;
    try {
      return await watch.register(queue.db, queue.key);
    } catch (err) {
      this.log.debug({ node: node.address, error: (err as Error).message }, 'a parked key could not be registered on its node');
      return null;
    }
  }

  /**
   * One try for `waiter` inside MULTI … EXEC on its shared link. `first`: the command as it
   * arrived, whose reply (errors included) is the client's. Parked: `TYPE key` and the command's
   * non-blocking form over `queue`'s key alone (pop-forms.ts) — a key of another type leaves the
   * client waiting (Valkey serves a blocked client only from a key of its type), while the
   * command's own errors (BLMOVE's destination of another type) are its reply.
   */
  private attempt(waiter: Waiter, queue: Queue, first: boolean): Promise<Attempt> {
    let settle!: (outcome: Attempt) => void;
    const result = new Promise<Attempt>((resolve) => (settle = resolve));
    waiter.inflight = result.then(() => {});
    const key = queue.key;
    const form = first ? null : popForm(waiter.command, requestArgs(waiter.raw));
    const commands = form === null ? [waiter.raw] : [encodeCommand(['TYPE', key]), form.command(key)];
    // Nothing reached the client: one that went meanwhile leaves its queues now.
    const unserved = (why: Attempt): void => {
      if (waiter.gone && !waiter.done) this.leave(waiter);
      settle(why);
    };
    new TransactionBlock(this.router, waiter.client, waiter.slot, commands, (outcome) => {
      waiter.inflight = null;
      if (outcome.kind === 'failed') {
        // The command as it arrived, written and lost: the client hears of it, as it would of its
        // own connection's loss. A parked client's pop lost with the node's link (a failover): the
        // client waits on, tried again wherever the key lives next — an error would end its wait
        // for a failure that is not its own (a value popped just before the loss is lost either way).
        if (!outcome.written || form !== null) return unserved('retry');
        this.serve(waiter, queue, encodeError(outcome.error));
        return settle('served');
      }
      let reply: Buffer | undefined;
      let type: string | null = null;
      if (outcome.reply[0] === 0x2d) {
        // EXEC refused: nothing ran. The reason is the queued command's own error.
        reply = outcome.queueError !== null ? encodeError(outcome.queueError) : outcome.reply;
      } else {
        let parts: Buffer[] | null = null;
        try {
          parts = splitAggregate(outcome.reply);
        } catch {
          parts = null;
        }
        reply = parts?.[parts.length - 1];
        if (!first && parts?.length === 2) type = parts[0]!.toString('latin1', 1, parts[0]!.length - 2);
        reply ??= encodeError(`ERR respool: unexpected EXEC reply to ${waiter.command.toUpperCase()}`);
      }
      const ofItsType = type === null || type === (ZSET_POPS.has(waiter.command) ? 'zset' : 'list');
      if (ofItsType && form !== null) reply = form.reply(reply, key) ?? NIL;
      if (isNilReply(reply) || !ofItsType) return unserved(ofItsType || type === 'none' ? 'empty' : 'wrongType');
      if (reply[0] === 0x2d && TRANSIENT.test(reply.toString('latin1', 0, 16))) return unserved('retry');
      this.serve(waiter, queue, Buffer.from(reply));
      settle('served');
    }).send();
    return result;
  }

  /** The waiter's reply: to the client, or back where it came from when the client has gone. */
  private serve(waiter: Waiter, queue: Queue, reply: Buffer): void {
    const wasDone = waiter.done;
    this.leave(waiter);
    if (queue.changedAt !== 0) {
      this.metrics?.raw.park_wake_seconds.labels(queue.node ?? 'unknown').observe((clockNow() - queue.changedAt) / 1000);
      queue.changedAt = 0;
    }
    if (!waiter.gone && !wasDone) return waiter.listener.served(reply);
    if (reply[0] !== 0x2d) this.putBack(waiter, reply);
  }

  private putBack(waiter: Waiter, reply: Buffer): void {
    const requestArgsNow = requestArgs(waiter.raw);
    if (moveDestination(waiter.command, requestArgsNow) !== null) return; // moved on the node: it stays there, as on Valkey
    const args = putBackCommand(waiter.command, reply, popsFromLeft(waiter.command, requestArgsNow));
    const count = (outcome: 'ok' | 'failed') => this.metrics?.parkPutBacks[outcome].inc();
    if (args === null) {
      count('failed');
      this.log.error({ event: 'put_back_failed', command: waiter.command, reply: reply.toString('latin1', 0, 200) }, 'a value popped for a parked client that left could not be put back: its reply is not understood');
      return;
    }
    // The key's next waiter is tried only after this (the drain awaits the try, and the try this).
    waiter.inflight = internalCall(this.router, waiter.client, args, waiter.slot).then((result) => {
      waiter.inflight = null;
      if (result[0] !== 0x2d) return count('ok');
      count('failed');
      this.log.error({ event: 'put_back_failed', command: waiter.command, error: result.toString('utf8', 1, result.length - 2) }, 'a value popped for a parked client that left could not be put back');
    });
  }

  // ---- what the nodes say -----------------------------------------------------------------------

  private onChange(address: string, keys: string[] | null): void {
    if (keys === null) {
      for (const queue of this.allQueues()) if (queue.node === address) this.changed(queue);
      return;
    }
    for (const name of keys) {
      for (let q = this.queues.get(name) ?? null; q !== null; q = q.next) this.changed(q);
    }
  }

  private onLost(watch: KeyWatch): void {
    if (this.watches.get(watch.address) === watch) this.watches.delete(watch.address);
    this.metrics?.parkWatchConnections.dec();
    if (this.closed) return;
    let keys = 0;
    for (const queue of this.allQueues()) {
      if (queue.node !== watch.address) continue;
      queue.node = null;
      keys++;
      // A watch that was open: its keys tried again at once. One that never opened (the node is
      // down): after the backoff, not in a loop of dials.
      if (watch.wasReady) this.changed(queue);
      else this.retryLater(queue);
    }
    if (keys > 0) this.log.info({ event: 'park_watch_lost', node: watch.address, keys, reason: watch.closeReason }, 'the watch connection for parked clients closed; their keys are tried and registered again');
  }

  private retryLater(queue: Queue): void {
    if (queue.live === 0) return this.drop(queue);
    if (!this.closed) this.retrying.add(queue);
  }
}
