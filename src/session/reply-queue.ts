import { FifoQueue } from '../util/fifo-queue.js';
import type { CallClient, CallOwner } from '../routing/upstream-call.js';

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

  constructor(
    readonly client: EntryClient,
    public reply: Buffer | null = null,
  ) {}

  onCallDone(reply: Buffer): void {
    this.fill(reply);
  }

  /** Sets the reply (exactly once; later calls are ignored) and tells the session. */
  fill(reply: Buffer): void {
    if (this.reply !== null) return;
    this.reply = reply;
    this.client.onEntryDone(this);
  }
}

/**
 * A session's replies in request order.
 *
 *   entries  : [ oldest … newest ], one per request (plus pub/sub pushes, queued behind the tail)
 *   invariant: only the head is ever written; a finished entry behind an unfinished one waits,
 *              its bytes copied (link read buffers are not ours to keep).
 */
export class ReplyQueue {
  private readonly entries = new FifoQueue<ReplyEntry>();

  get length(): number {
    return this.entries.length;
  }

  push(entry: ReplyEntry): void {
    this.entries.push(entry);
  }

  isHead(entry: ReplyEntry): boolean {
    return this.entries.peek() === entry;
  }

  /** Takes every finished entry off the head, in order, and hands its reply to `write`. */
  drainHead(write: (reply: Buffer) => void): void {
    let head = this.entries.peek();
    while (head !== undefined && head.reply !== null) {
      this.entries.shift();
      if (!head.silent) write(head.reply);
      head = this.entries.peek();
    }
  }
}
