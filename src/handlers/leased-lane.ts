import { encodeCommand, encodeError } from '../resp/encode.js';
import { ProxyError } from '../errors.js';
import { splitAggregate } from '../resp/decode.js';
import type { LinkRequest } from '../upstream/link.js';
import type { DedicatedConnection } from '../upstream/dedicated-connection.js';
import type { ReplyEntry } from '../session/reply-queue.js';
import { local, parseDbIndex } from './local.js';
import type { CommandRequest, HandlerSession } from './types.js';

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
 *               leased in is closed, not reused (dedicated-pool.ts).
 */
export class LeasedLane {
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

  constructor(
    readonly conn: DedicatedConnection,
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

/** Commands about the client's own connection: still answered by respool inside a lane. */
const OWN_CONNECTION = new Set(['auth', 'hello', 'client|setname', 'client|getname', 'client|id', 'client|info', 'client|setinfo', 'quit', 'readonly', 'readwrite']);

/**
 * WATCH over several slots cannot be split: one node could commit while another aborts. With
 * transactions.crossSlot refuse the client gets Valkey's own CROSSSLOT; with split (where other
 * transactions over several slots work) the same code with why and what to do.
 */
export function watchCrossSlotError(session: HandlerSession): string {
  return session.ctx.config.transactions.crossSlot === 'refuse' ? ProxyError.crossSlot() : ProxyError.watchCrossSlot();
}

/** Commands that drive the lane's transaction itself (never refused for their keys). */
const TRANSACTION_CONTROL = new Set(['multi', 'exec', 'discard', 'unwatch']);
const DISCARD = encodeCommand(['DISCARD']);

/**
 * Every request of a client with an open lane. False: the request is not the lane's (its keys
 * live on another node, outside MULTI): the caller dispatches it as usual.
 */
export function onLane(session: HandlerSession, lane: LeasedLane, req: CommandRequest): boolean {
  const { command } = req;
  if (OWN_CONNECTION.has(command)) {
    local(session, req);
    return true;
  }
  if (command === 'reset') {
    lane.end(false);
    local(session, req);
    return true;
  }
  // WATCH inside MULTI goes to the node, which refuses it whatever its keys.
  if (!TRANSACTION_CONTROL.has(command) && !(command === 'watch' && lane.inMulti) && keysElsewhere(session, lane, req)) {
    if (command !== 'watch' && !lane.inMulti) return false;
    if (lane.inMulti) lane.dirty = true;
    session.replyNow(encodeError(watchCrossSlotError(session)));
    return true;
  }
  sendOnLane(session, lane, req);
  return true;
}

/** In a cluster: the request's keys span slots, or live in a slot that a node other than the lane's owns. */
function keysElsewhere(session: HandlerSession, lane: LeasedLane, req: CommandRequest): boolean {
  const ctx = session.ctx;
  if (req.spec === undefined || !ctx.isCluster()) return false;
  const slot = ctx.router.slotOf(req.spec, req.args, ctx.commands());
  if (typeof slot !== 'number') return true; // several slots (a topology is known: the lane exists)
  if (slot < 0) return false;
  const node = ctx.router.primaryFor(slot);
  return node !== undefined && node.address !== lane.conn.address;
}

function sendOnLane(session: HandlerSession, lane: LeasedLane, req: CommandRequest): void {
  const { command } = req;
  // In a cluster SELECT stays respool's (only 0), and with CLIENT TRACKING on (its lanes stay in
  // database 0); against a standalone server the lane's connection switches (class comment).
  if (command === 'select' && (session.ctx.isCluster() || session.state.tracking !== null)) return local(session, req);
  let ends = false;
  let afterReply: ((reply: Buffer) => void) | undefined;
  if (command === 'watch' && !lane.inMulti) for (let i = 1; i < req.args.length; i++) lane.watched.add(req.args[i]!.toString('latin1'));
  if (command === 'multi') {
    if (!lane.inMulti) {
      lane.queued = 0;
      lane.selects = null;
    }
    lane.inMulti = true; // a nested MULTI is refused by the server, not queued
  } else if (command === 'exec' || command === 'discard') {
    ends = lane.inMulti;
    lane.inMulti = false;
    if (command === 'discard') lane.selects = null;
  } else if (command === 'unwatch') ends = !lane.inMulti;
  else if (command === 'select') {
    const db = req.args.length === 2 ? parseDbIndex(req.args[1]!) : null;
    if (lane.inMulti) {
      if (typeof db === 'number') (lane.selects ??= []).push({ index: lane.queued, db });
    } else if (typeof db === 'number') {
      afterReply = (reply) => {
        if (reply[0] === 0x2b /* +OK */) lane.selected(db);
      };
    }
  }
  // Everything else sent inside MULTI is queued by the server, or refused — which aborts EXEC.
  if (lane.inMulti && command !== 'multi' && command !== 'watch') lane.queued++;
  if (!ends) {
    lane.send(req.raw, session.reserve(), afterReply);
    return;
  }
  // respool refused a queued command: the node's transaction is discarded, EXEC aborts as Valkey's.
  const discard = command === 'exec' && lane.dirty;
  lane.dirty = false;
  // The transaction is over once this reply is back: later commands wait for it (barrier).
  const raw = discard ? DISCARD : Buffer.from(req.raw);
  session.runExclusive(() => {
    const entry = session.reserve();
    const afterReply = (reply: Buffer): void => {
      if (command === 'exec' && !discard) lane.afterExec(reply);
      lane.end(reply[0] !== 0x2d /* an error leaves state unknown */);
    };
    lane.send(raw, entry, afterReply, discard ? (reply) => (reply[0] === 0x2d ? reply : EXEC_ABORT) : undefined);
  });
}

const EXEC_ABORT = encodeError(ProxyError.execAbort());
