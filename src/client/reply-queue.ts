import { clockNow } from '../util/read-clock.js';
import { FifoQueue } from '../util/fifo-queue.js';
import { DEV_CHECKS, invariant } from '../util/dev-checks.js';
import type { HistogramSeries } from '../metrics/fast-histogram.js';
import type { CallClient, CallOwner } from '../routing/upstream-call.js';
import { RequestFrame } from '../resp/request-framer.js';
import type { CommandFamily } from '../commands/proxy-handling.js';
import type { ReplyNames } from '../keys/reply-names.js';

/** Told about every timed entry as its reply is written (observe/request-observer.ts: slow log, per-command latency). */
export interface ReplyObserver {
  requestDone(entry: ReplyEntry, ms: number): void;
}

/** What an entry reports to: the session that owns the queue. */
export interface EntryClient extends CallClient {
  onEntryDone(entry: ReplyEntry): void;
}

/**
 * One place in a session's reply queue: one reply owed to the client, in request order. It is
 * the owner of the upstream call(s) that produce the reply (a lone call, or a fragmented request),
 * or is filled directly (local commands, refusals, transactions, pushes).
 */
export class ReplyEntry implements CallOwner {
  /** CLIENT REPLY OFF/SKIP: the reply is awaited in order but not written. */
  silent = false;
  /** When its request arrived (performance.now() of the chunk) and its family's latency series; null for pushes. */
  startedAt = 0;
  series: HistogramSeries | null = null;
  /** The request it answers and its family (timed entries only): the slow log and per-command latency read them when the reply is written. */
  request: RequestFrame | null = null;
  family: CommandFamily | null = null;
  /** The node(s) its call went to and the time there, send → reply (RESPOOL SLOWLOG's split). */
  node = '';
  upstreamMs = 0;
  /** Its place in its queue, counted in development builds (ReplyQueue checks replies leave in that order). */
  seq = 0;
  /** Its reply is counted in its queue's heldBytes (finished, waiting behind an unanswered entry). */
  held = false;
  /** The client's key names for the nodes' in its reply (keys/reply-names.ts), for a request under colocation rules. */
  replyNames: ReplyNames | null = null;
  /** Set for a request the hot-key sampler picked: told the reply's size (observe/big-keys.ts). */
  private sizeListener: ((bytes: number) => void) | null = null;
  /** Run once its reply is in (a write's near-cache mark ends: ReplyQueue.afterReply). */
  afterFill: (() => void) | null = null;

  constructor(
    readonly client: EntryClient,
    public reply: Buffer | null = null,
  ) {}

  onCallDone(reply: Buffer): void {
    this.fill(reply);
  }

  /** A call for this entry got its reply from `node` after `ms` (router.ts observeReply); fan-outs keep the slowest. */
  upstreamTimed(node: string, ms: number): void {
    if (this.node === '') this.node = node;
    else if (this.node !== node && !this.node.includes(node)) this.node = this.node.length < 200 ? `${this.node},${node}` : this.node;
    if (ms > this.upstreamMs) this.upstreamMs = ms;
  }

  /**
   * Keeps its request as `copy` (the request's exact bytes), letting go of the read buffer and
   * argument views the request pointed into: for a request that waits long (a parked pop).
   */
  keepRequestAs(copy: Buffer): void {
    const r = this.request;
    if (r === null) return;
    const kept = new RequestFrame(copy);
    kept.spec = r.spec;
    kept.command = r.command;
    this.request = kept;
  }

  runAfterFill(): void {
    const after = this.afterFill!;
    this.afterFill = null;
    after();
  }

  measureReply(onSize: (bytes: number) => void): void {
    this.sizeListener = onSize;
  }

  /** Sets the reply (exactly once; later calls are ignored) and tells the session. */
  fill(reply: Buffer): void {
    if (this.reply !== null) return;
    this.reply = this.replyNames === null ? reply : this.replyNames(reply);
    if (this.sizeListener !== null) this.sizeListener(reply.length);
    if (this.afterFill !== null) this.runAfterFill();
    this.client.onEntryDone(this);
  }
}

/**
 * A session's replies in request order.
 *
 *   entries  : [ oldest … newest ], one per request (plus pub/sub pushes, queued behind the tail)
 *   invariant: only the head is ever written; a finished entry behind an unfinished one waits,
 *              its bytes copied (link read buffers are not ours to keep).
 *   heldBytes: the bytes of the finished entries still queued (what the queue holds in memory:
 *              CLIENT LIST omem, limits.maxMemory), kept as entries are filled and written.
 */
export class ReplyQueue {
  private readonly entries = new FifoQueue<ReplyEntry>();
  /** Set by the session around one request's dispatch: entries pushed meanwhile are timed. */
  stamp = 0;
  /** The current request's reply names (client-session.ts startRequest), given to the entries it pushes. */
  replyNames: ReplyNames | null = null;
  series: HistogramSeries | null = null;
  request: RequestFrame | null = null;
  family: CommandFamily | null = null;
  /** Told about every timed entry as it is written (slow log, per-command latency); null in stand-in sessions. */
  observer: ReplyObserver | null = null;
  /** Development builds: entries pushed and written so far (the order check in drainHead). */
  private pushed = 0;
  private written = 0;
  /** Finished replies waiting in the queue, and their bytes (see heldBytes above). */
  heldCount = 0;
  heldBytes = 0;

  get length(): number {
    return this.entries.length;
  }

  /**
   * One request is being dispatched: the entries it pushes name keys as `replyNames` says, and —
   * with `series` (metrics on) — are timed from `stamp` (its chunk's arrival) to their write.
   */
  beginRequest(request: RequestFrame, family: CommandFamily, replyNames: ReplyNames | null, stamp: number, series: HistogramSeries | null): void {
    this.replyNames = replyNames;
    if (series === null) return;
    this.stamp = stamp;
    this.series = series;
    this.request = request;
    this.family = family;
  }

  /**
   * Runs once the next entry the current request pushes has its reply (at once if it has one, or
   * if the request pushes none): how long a write through respool is in flight (nearcache/).
   */
  afterReply: (() => void) | null = null;

  /** Its dispatch ended: later pushes (pub/sub messages) are not this request's. */
  endRequest(): void {
    if (this.afterReply !== null) {
      const after = this.afterReply;
      this.afterReply = null;
      after();
    }
    this.replyNames = null;
    this.series = null;
    this.request = null;
  }

  /**
   * The client's tenant's meter (src/tenants/tenant.ts), or null: the replies owed over all its
   * clients, and its last-minute latency, told of each timed reply as it is written.
   */
  owed: { count: number; readonly latency: { recordMs(ms: number): void } | null } | null = null;

  push(entry: ReplyEntry): void {
    if (this.owed !== null) this.owed.count++;
    entry.replyNames = this.replyNames;
    if (this.series !== null) {
      entry.startedAt = this.stamp;
      entry.series = this.series;
      entry.request = this.request;
      entry.family = this.family;
    }
    if (DEV_CHECKS) {
      invariant(entry.seq === 0, 'an entry is queued once');
      entry.seq = ++this.pushed;
    }
    this.entries.push(entry);
    if (this.afterReply !== null) {
      entry.afterFill = this.afterReply;
      this.afterReply = null;
      if (entry.reply !== null) entry.runAfterFill();
    }
    if (entry.reply !== null) this.hold(entry);
  }

  /** A finished entry that waits (behind an unanswered one, or until the head is written): counted in heldBytes. */
  private hold(entry: ReplyEntry): void {
    entry.held = true;
    this.heldCount++;
    this.heldBytes += entry.reply!.length;
  }

  /** An entry behind the head was filled: its reply is copied (a link's read buffer is not ours to keep) and held. */
  keep(entry: ReplyEntry): void {
    entry.reply = Buffer.from(entry.reply!);
    this.hold(entry);
  }

  isHead(entry: ReplyEntry): boolean {
    return this.entries.peek() === entry;
  }

  /** Finished replies waiting behind an unanswered one, and their bytes (CLIENT LIST oll, omem). */
  heldReplies(): { count: number; bytes: number } {
    return { count: this.heldCount, bytes: this.heldBytes };
  }

  /** Takes every finished entry off the head, in order, and hands its reply to `sink` (the session: no closure per session). */
  drainHead(sink: { writeReply(reply: Buffer, upstreamMs: number): void }): void {
    let head = this.entries.peek();
    let now = -1; // one clock read per drain, only when a timed entry leaves
    while (head !== undefined && head.reply !== null) {
      this.entries.shift();
      if (this.owed !== null) this.owed.count--;
      if (head.held) {
        this.heldCount--;
        this.heldBytes -= head.reply.length;
      }
      if (DEV_CHECKS) invariant(head.seq === ++this.written, 'replies leave in the order their entries were queued');
      if (!head.silent) sink.writeReply(head.reply, head.upstreamMs);
      if (head.series !== null) {
        if (now < 0) now = clockNow();
        const ms = now - head.startedAt;
        head.series.observe(ms / 1000); // respool_client_request_duration_seconds{family}
        if (this.observer !== null) this.observer.requestDone(head, ms);
        if (this.owed !== null && this.owed.latency !== null) this.owed.latency.recordMs(ms);
      }
      head = this.entries.peek();
    }
  }
}
