import { clockNow } from '../util/read-clock.js';
import { encodeError } from '../resp/encode.js';
import { nullArray } from '../resp/constant-replies.js';
import { ProxyError } from '../errors.js';
import type { LeasedConnection } from '../upstream/leased-connection.js';
import type { HandlerSession } from '../client/handler-session.js';
import { ignoreReply } from '../upstream/link.js';
import { ASKING } from '../routing/redirect-follower.js';

/** What CLIENT UNBLOCK … ERROR gives a blocked client (Valkey's blocked.c). */
export const UNBLOCKED = encodeError('UNBLOCKED client unblocked via CLIENT UNBLOCK');

/**
 * Valkey's reply to a blocked client whose timeout passed (blocked.c, replyToBlockedClientTimedOut):
 * a null array for every list, sorted-set and stream command, BLMOVE and BRPOPLPUSH included (RESP3:
 * null). Not the null bulk they answer inside MULTI, where they do not block.
 */
export function timeoutReply(protocol: 2 | 3): Buffer {
  return nullArray(protocol);
}

/** CLIENT UNBLOCK racing the blocking command to its node: tries, and the pause between them. */
const UNBLOCK_TRIES = 5;
const UNBLOCK_RETRY_MS = 5;

/**
 * One blocking command (BLPOP …, XREAD … BLOCK) on a leased connection of its own to the
 * primary owning `slot` (upstream/lease-pools.ts): a shared link must never wait on one
 * client's command.
 *
 *  - Deadline: `timeoutMs` (the command's own) plus dedicated.blockMarginMs; none for null (0 =
 *    for ever). The shared links' commandMs never applies.
 *  - MOVED (the slot moved before the command ran): sent again on the new owner's lease; ASK
 *    (mid-migration): on a lease to the ASK's target, ASKING first — as the redirect follower
 *    decides (routing/redirect-follower.ts: hop bound, topology patch, counters). Never re-sent after a lost connection: `done` gets the error.
 *  - `done` gets exactly one reply (copied), or null when the call was cancelled before it was
 *    sent (it then did nothing). The lease goes back clean after the reply.
 *  - unblock(): CLIENT UNBLOCK of its connection (TIMEOUT: the node answers nil; ERROR:
 *    -UNBLOCKED); abandon(): the client went away — unblocked and released by the pool, the
 *    reply still reaches `done`.
 */
export class BlockingCall {
  private conn: LeasedConnection | null = null;
  private finished = false;
  /** unblock() or abandon() came before the lease: the command is not sent. */
  private cancelled = false;
  private hops = 0;
  /** CLIENT UNBLOCKs sent for this call and not answered yet; the lease waits for them. */
  private unblocking = 0;
  private afterUnblock: (() => void) | null = null;
  /** Waiting for a lease (every lease of the node taken: dedicated.maxPerNode), and the command's own timeout while it waits. */
  private waiting = false;
  private waitTimer: NodeJS.Timeout | null = null;

  constructor(
    private readonly session: HandlerSession,
    private readonly raw: Buffer,
    /** Lower case, for the redirect follower's counters and errors. */
    private readonly command: string,
    private slot: number,
    private readonly timeoutMs: number | null,
    private readonly done: (reply: Buffer | null) => void,
  ) {}

  /** To the slot's primary; `ask`: to an ASK's target instead, ASKING first. */
  start(ask: { host: string; port: number } | null = null): void {
    const { ctx, state } = this.session;
    const node = ask ?? ctx.router.primaryFor(this.slot);
    if (node === undefined) return this.finish(encodeError(this.slot < 0 ? ProxyError.topologyUnknown() : ProxyError.slotNotServed(this.slot)));
    // Every lease of the node may be taken: the command waits for one in the pool's queue as long
    // as it would block (its own timeout, then Valkey's timeout reply), not refused after
    // dedicated.acquireTimeoutMs; CLIENT UNBLOCK and the client's going end the wait.
    this.waiting = true;
    if (this.timeoutMs !== null && this.waitTimer === null && this.hops === 0) this.waitTimer = setTimeout(() => this.endWait(timeoutReply(state.protocol)), this.timeoutMs);
    ctx.dedicated.acquire(node.host, node.port, state.protocol, state.db, state.acl.upstream, () => !this.cancelled && !this.session.closed).then(
      (conn) => {
        this.stopWaiting();
        if (this.cancelled || this.session.closed) {
          ctx.dedicated.release(conn, true);
          return this.finish(null);
        }
        if (ask !== null) conn.send(ASKING, ignoreReply());
        this.send(conn);
      },
      (err: Error) => {
        this.stopWaiting();
        this.finish(encodeError(err.message));
      },
    );
  }

  private stopWaiting(): void {
    this.waiting = false;
    if (this.waitTimer !== null) clearTimeout(this.waitTimer);
    this.waitTimer = null;
  }

  /** The wait for a lease ends before the command was sent: `reply` is what Valkey answers a blocked client then. The lease, when it comes, goes back. */
  private endWait(reply: Buffer): void {
    if (!this.waiting || this.finished) return;
    this.cancelled = true;
    this.stopWaiting();
    this.finish(reply);
  }

  /** CLIENT UNBLOCK its connection; true if it was blocked. The command may still be on its way: a few quick tries. */
  async unblock(how: 'timeout' | 'error'): Promise<boolean> {
    if (this.finished) return false;
    if (this.conn === null) {
      // Still waiting for a lease: blocked as far as the client can tell, so unblocked here.
      if (this.waiting) {
        this.endWait(how === 'timeout' ? timeoutReply(this.session.state.protocol) : UNBLOCKED);
        return true;
      }
      this.cancelled = true;
      return false;
    }
    const conn = this.conn;
    for (let attempt = 0; attempt < UNBLOCK_TRIES; attempt++) {
      if (attempt > 0) await new Promise((r) => setTimeout(r, UNBLOCK_RETRY_MS));
      // Answered meanwhile: its connection may already serve someone else.
      if (this.finished || this.conn !== conn) return false;
      // Until the node has answered it, the connection is not handed back: a CLIENT UNBLOCK
      // still on its way must never reach the next command leased on it.
      this.unblocking++;
      const done = await this.session.ctx.unblockLease(conn.host, conn.port, conn.clientId, how).catch(() => false);
      if (--this.unblocking === 0) this.afterUnblock?.();
      if (done) return true;
    }
    return false;
  }

  /** The client went away: the pool unblocks the connection and takes it back. */
  abandon(): void {
    if (this.finished) return;
    if (this.conn === null) {
      this.cancelled = true;
      this.stopWaiting();
    } else this.session.ctx.dedicated.abandon(this.conn);
  }

  /** The node that answered and the time from the command's write to its reply: blocked there (the slow log leaves it out). */
  upstream: { node: string; ms: number } | null = null;

  private send(conn: LeasedConnection): void {
    const ctx = this.session.ctx;
    this.conn = conn;
    const sentAt = clockNow();
    if (this.timeoutMs !== null) conn.setDeadline(this.timeoutMs + ctx.config.dedicated.blockMarginMs);
    let answered = false;
    const settle = (reply: Buffer, clean: boolean): void => {
      if (answered) return;
      answered = true;
      this.upstream = { node: conn.address, ms: clockNow() - sentAt };
      this.conn = null;
      conn.setDeadline(null);
      if (this.unblocking === 0) ctx.dedicated.release(conn, clean);
      else this.afterUnblock = () => ctx.dedicated.release(conn, clean);
      const step = clean && !this.session.closed && !this.cancelled ? ctx.router.redirects.step(reply, conn.address, this.hops++, this.command) : null;
      if (step === null) return this.finish(reply);
      if (step.kind === 'limit') return this.finish(step.error);
      this.slot = step.slot;
      this.start(step.kind === 'ask' ? { host: step.host, port: step.port } : null);
    };
    conn.send(this.raw, {
      sentAt: 0,
      // Copied: the lease goes back to its pool before the client reads the reply.
      onReply: (frame) => settle(Buffer.from(frame), true),
      onLinkFailure: (error) => {
        ctx.log.debug({ node: conn.address, error }, 'leased connection failed under a blocking command');
        settle(encodeError(error), false);
      },
    });
  }

  private finish(reply: Buffer | null): void {
    if (this.finished) return;
    this.finished = true;
    this.done(reply);
  }
}
