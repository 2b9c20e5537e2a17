import { encodeError } from '../resp/encode.js';
import type { LinkRequest } from '../upstream/link.js';
import type { DedicatedConnection } from '../upstream/dedicated-connection.js';
import type { ReplyEntry } from '../session/reply-queue.js';
import { local } from './local.js';
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
 */
export class LeasedLane {
  /** MULTI was sent on the lane and neither EXEC nor DISCARD yet. */
  inMulti = false;
  /** Keys WATCHed on the lane (INFO clients: total_watched_keys), latin1. */
  readonly watched = new Set<string>();

  constructor(
    readonly conn: DedicatedConnection,
    private readonly session: HandlerSession,
  ) {}

  /** Sends a request on the lane; its one reply fills a new entry. */
  send(raw: Buffer, entry: ReplyEntry, afterReply?: (reply: Buffer) => void): void {
    const request: LinkRequest = {
      sentAt: 0,
      onReply: (frame) => {
        const reply = Buffer.from(frame);
        afterReply?.(reply);
        entry.fill(reply);
      },
      onLinkFailure: (error) => {
        this.end(false);
        entry.fill(encodeError(error));
      },
    };
    this.conn.send(Buffer.from(raw), request);
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
const OWN_CONNECTION = new Set(['auth', 'hello', 'client|setname', 'client|getname', 'client|id', 'client|info', 'client|setinfo', 'quit', 'select', 'readonly', 'readwrite']);

/** Every request of a client with an open lane. */
export function onLane(session: HandlerSession, lane: LeasedLane, req: CommandRequest): void {
  const { command } = req;
  if (OWN_CONNECTION.has(command)) return local(session, req);
  if (command === 'reset') {
    lane.end(false);
    return local(session, req);
  }
  let ends = false;
  if (command === 'watch' && !lane.inMulti) for (let i = 1; i < req.args.length; i++) lane.watched.add(req.args[i]!.toString('latin1'));
  if (command === 'multi') lane.inMulti = true;
  else if (command === 'exec' || command === 'discard') {
    ends = lane.inMulti;
    lane.inMulti = false;
  } else if (command === 'unwatch') ends = !lane.inMulti;
  if (!ends) {
    lane.send(req.raw, session.reserve());
    return;
  }
  // The transaction is over once this reply is back: later commands wait for it (barrier).
  const raw = Buffer.from(req.raw);
  session.runExclusive(() => {
    lane.send(raw, session.reserve(), (reply) => lane.end(reply[0] !== 0x2d /* an error leaves state unknown */));
  });
}
