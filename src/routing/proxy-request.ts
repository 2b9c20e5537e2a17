import type { Link, LinkFailureCause, LinkRequest } from '../upstream/link.js';
import type { Router } from './router.js';
import type { ReadChoice, ReadStrategy } from './read-strategy.js';

/** Where a finished request's reply goes: the client session's ordered reply queue. */
export interface ReplySink {
  /** The client's id: also its link affinity, so its commands to a node keep their order. */
  readonly id: number;
  readonly protocol: 2 | 3;
  readonly closed: boolean;
  onRequestDone(req: ReplyEntry): void;
}

/** One entry of a session's reply queue: done once `reply` is set. */
export interface ReplyEntry {
  reply: Buffer | null;
}

/**
 * One client command on its way through respool: sent to a node, maybe redirected or retried
 * (within budgets), finished with exactly one reply. The session owns reply order; this object
 * only knows its own fate.
 */
export class ProxyRequest implements LinkRequest, ReplyEntry {
  sentAt = 0;
  reply: Buffer | null = null;
  redirects = 0;
  retries = 0;
  /** Address of the node the request was last sent to (for errors and metrics). */
  node = '';
  /** A read-only command: may be re-sent even when a lost link may have run it (router.ts). */
  safeToRepeat = false;
  /** Read-only command under a read strategy (read-strategy.ts); null: the slot's primary. */
  read: ReadStrategy | null = null;
  /** Where the read strategy last sent it. */
  readChoice: ReadChoice | null = null;
  /** Replicas this read already failed on (MOVED, LOADING, link failure), skipped on re-plan. */
  avoid: string[] | null = null;

  constructor(
    readonly sink: ReplySink,
    readonly router: Router,
    /** The request's exact RESP bytes, forwarded as received. */
    readonly raw: Buffer,
    /** Lower-case command name, for metrics and errors. */
    readonly command: string,
    /** Hash slot of its keys, -1 for keyless commands. */
    public slot: number,
  ) {}

  onReply(frame: Buffer, link: Link): void {
    if (frame[0] === 0x2d /* - */ && this.router.handleErrorReply(this, frame, link)) return;
    this.router.observeReply(this, frame[0] === 0x2d);
    this.finish(frame);
  }

  onLinkFailure(error: string, written: boolean, cause?: LinkFailureCause): void {
    this.router.handleLinkFailure(this, error, written, cause);
  }

  /** Completes the request with these reply bytes (exactly once). */
  finish(reply: Buffer): void {
    if (this.reply !== null) return;
    this.reply = reply;
    this.sink.onRequestDone(this);
  }
}
