import { encodeError } from '../resp/encode.js';
import { splitAggregate } from '../resp/decode.js';
import type { LinkRequest } from '../upstream/link.js';
import type { LeasedConnection } from '../upstream/leased-connection.js';
import type { ReplyEntry } from './reply-queue.js';
import type { HandlerSession } from './handler-session.js';
import type { ReplyNames } from '../keys/reply-names.js';

/**
 * A client's own leased connection from WATCH until the transaction is over: WATCH needs the same
 * upstream connection until EXEC. While the lane is open every command of the client goes on it,
 * in order, as it arrives (MULTI, the queued commands and EXEC included: Valkey itself runs the
 * transaction, so its replies are exact). Commands about the client's own connection (AUTH,
 * HELLO, CLIENT SETNAME …) stay respool's.
 *
 *   opened by : WATCH (handlers/transaction.ts), after the client's earlier replies (barrier)
 *   closed by : EXEC or DISCARD of the upstream's MULTI, UNWATCH outside MULTI — once its reply
 *               is written (barrier: later commands go back to shared links only then); RESET
 *               or the client's close (the connection is closed: its WATCH state is unknown to
 *               the next user); the connection failing (the client gets the error)
 *   slots     : (cluster) the lane is one node's. WATCH of keys another node owns is refused
 *               (WATCH over several slots cannot be made safe), and so is a command queued
 *               inside MULTI whose keys another node owns — then EXEC sends DISCARD and answers
 *               EXECABORT, as after any refused command; outside MULTI such a command is not the
 *               lane's business and takes its usual path (onLane returns false)
 *   SELECT    : against a standalone upstream it goes on the lane too (the server checks it and
 *               answers); the client's database becomes the one the server switched to — at
 *               once outside MULTI, at EXEC for a SELECT queued inside it (its element of EXEC's
 *               array says whether it ran). A lease handed back in another database than it was
 *               leased in is closed, not reused (lease-pools.ts).
 */
export class WatchLane {
  /** MULTI was sent on the lane and neither EXEC nor DISCARD yet. */
  inMulti = false;
  /** Keys WATCHed on the lane (INFO clients: total_watched_keys), latin1. */
  readonly watched = new Set<string>();
  /** Commands the server queued since MULTI (their places in EXEC's array). */
  queued = 0;
  /** SELECTs queued since MULTI: their place in EXEC's array and the database each asks for. */
  selects: Array<{ index: number; db: number }> | null = null;
  /** respool refused a command queued since MULTI (its keys live on another node): EXEC discards. */
  dirty = false;
  /** How each command queued since MULTI turns its element of EXEC's array into the client's names (keys/reply-names.ts). */
  queuedNames: Array<ReplyNames | null> = [];

  constructor(
    readonly conn: LeasedConnection,
    private readonly session: HandlerSession,
  ) {}

  /** Sends a request on the lane; its one reply (or what `answer` makes of it) fills a new entry. */
  send(raw: Buffer, entry: ReplyEntry, afterReply?: (reply: Buffer) => void, answer?: (reply: Buffer) => Buffer): void {
    const request: LinkRequest = {
      sentAt: 0,
      onReply: (frame) => {
        const reply = Buffer.from(frame);
        afterReply?.(reply);
        entry.fill(answer === undefined ? reply : answer(reply));
      },
      onLinkFailure: (error) => {
        this.end(false);
        entry.fill(encodeError(error));
      },
    };
    this.conn.send(Buffer.from(raw), request);
  }

  /** The server switched the lane's connection to `db`: the client is in that database now. */
  selected(db: number): void {
    this.conn.db = db;
    this.session.state.select(db);
  }

  /**
   * EXEC's reply on the lane: the database the last SELECT that ran inside the transaction
   * switched to (each SELECT's element is +OK when it ran). Nothing ran (an error, nil): no change.
   */
  afterExec(reply: Buffer): void {
    const selects = this.selects;
    this.selects = null;
    if (selects === null || (reply[0] !== 0x2a && reply[0] !== 0x7e) /* not * or ~ */) return;
    let parts: Buffer[] | null;
    try {
      parts = splitAggregate(reply);
    } catch {
      parts = null;
    }
    if (parts === null) return;
    if (parts.length !== this.queued) {
      // Not the array this lane counted: which database the connection is in is unknown, so
      // it is closed when the lane ends; the client keeps its database.
      this.conn.db = -1;
      return;
    }
    let db = -1;
    for (const { index, db: target } of selects) if (parts[index]![0] === 0x2b /* + */) db = target;
    if (db >= 0) this.selected(db);
  }

  /** Gives the connection back (clean: its state is known to be reset) and leaves the lane. */
  end(clean: boolean): void {
    const state = this.session.state;
    if (state.lane !== this) return;
    state.lane = null;
    state.lease = null;
    this.session.ctx.dedicated.release(this.conn, clean);
  }
}
