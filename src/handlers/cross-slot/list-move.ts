import calculateSlot from 'cluster-key-slot';
import { encodeBulk, encodeCommand, encodeError } from '../../resp/encode.js';
import { decodeReply, splitAggregate } from '../../resp/decode.js';
import { ProxyError } from '../../errors.js';
import { TransactionBlock } from '../../routing/transaction-block.js';
import { internalCall } from '../../routing/internal-call.js';
import type { ReplyEntry } from '../../client/reply-queue.js';
import { BlockingCall } from '../blocking-call.js';
import { commandTimeoutMs } from '../blocking-timeout.js';
import type { CommandRequest, HandlerSession } from '../../client/handler-session.js';

/** A list move over two slots, as parsed: LMOVE / BLMOVE src dst LEFT|RIGHT LEFT|RIGHT [timeout]. */
interface Move {
  readonly source: Buffer;
  readonly destination: Buffer;
  readonly fromLeft: boolean;
  readonly toLeft: boolean;
  /** BLMOVE / BRPOPLPUSH: the timeout argument as sent; null for LMOVE / RPOPLPUSH. */
  readonly timeout: Buffer | null;
}

/**
 * LMOVE, RPOPLPUSH, BLMOVE and BRPOPLPUSH whose source and destination lists are in different
 * slots: the element is popped from the source on its slot's primary (blocking there, on a
 * leased connection, when BLMOVE finds it empty), then pushed onto the destination on its own
 * slot's primary, and the element is the reply, as on one server. Not atomic: between the pop and
 * the push another client sees the element in neither list. If the push fails (the destination
 * is not a list: Valkey's WRONGTYPE) the element is put back where it came from and the client
 * gets the push's error. The client's later commands wait for the push.
 *
 * Checks in Valkey's order: LEFT/RIGHT (syntax error), the timeout (the pop itself refuses a bad
 * one), the source's type and emptiness (nil when it is missing), the destination's type.
 * Returns false for a command it does not handle (the caller answers CROSSSLOT).
 */
export function listMoveCrossSlot(session: HandlerSession, req: CommandRequest, reserved?: ReplyEntry): boolean {
  const move = parseMove(req);
  if (move === null) return false;
  const ctx = session.ctx;
  ctx.metrics?.crossSlotCommands.move.inc();
  if (reserved === undefined) ctx.metrics?.commandCounter(req.command).inc();
  const timeoutMs = move === 'syntax' || move.timeout === null ? null : commandTimeoutMs(session, req);
  const run = (entry: ReplyEntry): void => {
    if (move === 'syntax') return entry.fill(encodeError(ProxyError.syntax()));
    void carryOut(session, move, timeoutMs).then(
      (reply) => entry.fill(reply),
      (err: Error) => entry.fill(encodeError(ProxyError.respool(err.message))),
    );
  };
  if (reserved !== undefined) {
    run(reserved);
    session.runExclusive(() => {}); // later requests wait for the push
  } else {
    session.runExclusive(() => run(session.reserve()));
  }
  return true;
}

function parseMove(req: CommandRequest): Move | 'syntax' | null {
  const args = req.args.map((a) => Buffer.from(a));
  const side = (b: Buffer | undefined): boolean | null => {
    const s = b?.toString('latin1').toLowerCase();
    return s === 'left' ? true : s === 'right' ? false : null;
  };
  const blocking = req.command === 'blmove' || req.command === 'brpoplpush';
  const named = req.command === 'lmove' || req.command === 'blmove'; // LEFT|RIGHT given
  if (args.length !== 3 + (named ? 2 : 0) + (blocking ? 1 : 0)) return null; // the node answers the arity
  const source = args[1]!;
  const destination = args[2]!;
  if (calculateSlot(source) === calculateSlot(destination)) return null; // one slot: the node's own command
  const fromLeft = named ? side(args[3]) : false;
  const toLeft = named ? side(args[4]) : true;
  if (fromLeft === null || toLeft === null) return 'syntax';
  return { source, destination, fromLeft, toLeft, timeout: blocking ? args[args.length - 1]! : null };
}

async function carryOut(session: HandlerSession, move: Move, timeoutMs: number | null): Promise<Buffer> {
  const popped = move.timeout === null ? await popNow(session, move) : await blockingPop(session, move, timeoutMs);
  if (popped.kind === 'reply') return popped.reply;
  const ctx = session.ctx;
  const push = await internalCall(ctx.router, session, [move.toLeft ? 'LPUSH' : 'RPUSH', move.destination, popped.element], calculateSlot(move.destination));
  if (push[0] !== 0x2d) return encodeBulk(popped.element, session.state.protocol);
  // The destination refused it (WRONGTYPE): the element goes back where it came from.
  const back = await internalCall(ctx.router, session, [move.fromLeft ? 'LPUSH' : 'RPUSH', move.source, popped.element], calculateSlot(move.source));
  if (back[0] === 0x2d) {
    ctx.metrics?.crossSlotPutBacks.failed.inc();
    ctx.log.error({ event: 'put_back_failed', key: move.source.toString('latin1'), error: back.toString('utf8', 1, back.length - 2) }, 'an element popped for a move over two slots could not be put back');
  } else {
    ctx.metrics?.crossSlotPutBacks.ok.inc();
  }
  return push;
}

/** The popped element, or the reply the client gets instead (nil, an error). */
type Popped = { kind: 'element'; element: Buffer } | { kind: 'reply'; reply: Buffer };

/** LMOVE / RPOPLPUSH: LPOP / RPOP of the source. */
async function popNow(session: HandlerSession, move: Move): Promise<Popped> {
  const reply = await internalCall(session.ctx.router, session, [move.fromLeft ? 'LPOP' : 'RPOP', move.source], calculateSlot(move.source));
  if (reply[0] !== 0x24 /* $ */) return { kind: 'reply', reply }; // nil (RESP2 $-1 is a $ too: below), _, an error
  if (reply.toString('latin1', 0, 4) === '$-1\r') return { kind: 'reply', reply };
  return { kind: 'element', element: bulkValue(reply) };
}

/**
 * BLMOVE / BRPOPLPUSH: BLMPOP <timeout> 1 source LEFT|RIGHT — first inside MULTI … EXEC (where
 * Valkey does not block: it pops at once, or answers nil), then, when the source was empty, on a
 * leased connection until the timeout. Its timeout check is BLMOVE's; its nil is BLMOVE's timeout.
 */
async function blockingPop(session: HandlerSession, move: Move, timeoutMs: number | null): Promise<Popped> {
  const raw = encodeCommand(['BLMPOP', move.timeout!, '1', move.source, move.fromLeft ? 'LEFT' : 'RIGHT']);
  const slot = calculateSlot(move.source);
  const ctx = session.ctx;
  const now = await new Promise<Buffer>((resolve) => {
    new TransactionBlock(ctx.router, session, slot, [raw], (outcome) => {
      if (outcome.kind === 'failed') return resolve(encodeError(outcome.error));
      if (outcome.reply[0] === 0x2d) return resolve(outcome.queueError !== null ? encodeError(outcome.queueError) : outcome.reply);
      const parts = splitAggregate(outcome.reply);
      resolve(parts?.[0] !== undefined ? Buffer.from(parts[0]) : encodeError(ProxyError.unexpectedReply('EXEC')));
    }).send();
  });
  if (!isNilArray(now)) return popResult(now);
  if (session.closed) return { kind: 'reply', reply: now };
  const state = session.state;
  const waited = await new Promise<Buffer | null>((resolve) => {
    const call = new BlockingCall(session, raw, 'blmpop', slot, timeoutMs, resolve);
    const lease = { abandon: () => call.abandon(), unblock: (how: 'timeout' | 'error') => call.unblock(how) };
    state.lease = lease;
    state.block([move.source.toString('latin1')], false);
    call.start();
  });
  state.lease = null;
  state.unblock();
  return waited === null ? { kind: 'reply', reply: now } : popResult(waited);
}

/** BLMPOP's reply: [key, [element]] → the element; nil or an error as they are. */
function popResult(reply: Buffer): Popped {
  if (reply[0] === 0x2d || isNilArray(reply)) return { kind: 'reply', reply };
  const value = decodeReply(reply, 8);
  const element = Array.isArray(value) && Array.isArray(value[1]) ? value[1][0] : undefined;
  return Buffer.isBuffer(element) ? { kind: 'element', element: Buffer.from(element) } : { kind: 'reply', reply: encodeError(ProxyError.unexpectedReply('BLMPOP')) };
}

function isNilArray(reply: Buffer): boolean {
  return reply.toString('latin1') === '*-1\r\n' || reply.toString('latin1') === '_\r\n';
}

/** A non-null bulk string's bytes. */
function bulkValue(reply: Buffer): Buffer {
  const start = reply.indexOf(0x0a) + 1;
  return Buffer.from(reply.subarray(start, reply.length - 2));
}
