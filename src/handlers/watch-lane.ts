// The handler side of a WATCH lane (client/watch-lane.ts holds the lane itself): which requests
// go on it, and what WATCH, MULTI, EXEC, DISCARD, UNWATCH and SELECT do to it.
import { encodeCommand, encodeError } from '../resp/encode.js';
import { ProxyError } from '../errors.js';
import type { WatchLane } from '../client/watch-lane.js';
import { execReplyNames } from '../keys/reply-names.js';
import { local, parseDbIndex } from './local.js';
import { LANE_OWN_COMMANDS, runsOnWatchLane } from './client-modes.js';
import type { CommandFamily } from '../commands/proxy-handling.js';
import type { CommandRequest, HandlerSession } from '../client/handler-session.js';

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
 * With a lane open, whether this request goes to the lane's node (onLane below sends it there),
 * not to respool's own answer: the client's own connection then answers even its refusals.
 */
export function goesToLaneNode(session: HandlerSession, family: CommandFamily, command: string): boolean {
  if (!runsOnWatchLane(family) || LANE_OWN_COMMANDS.has(command) || command === 'reset') return false;
  return command !== 'select' || !keepsSelect(session);
}

/** In a cluster SELECT stays respool's (only 0), and with CLIENT TRACKING on (its lanes stay in database 0). */
function keepsSelect(session: HandlerSession): boolean {
  return session.ctx.isCluster() || session.state.tracking !== null;
}

/**
 * Every request of a client with an open lane. False: the request is not the lane's (its keys
 * live on another node, outside MULTI): the caller dispatches it as usual.
 */
export function onLane(session: HandlerSession, lane: WatchLane, req: CommandRequest): boolean {
  const { command } = req;
  if (LANE_OWN_COMMANDS.has(command)) {
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
function keysElsewhere(session: HandlerSession, lane: WatchLane, req: CommandRequest): boolean {
  const ctx = session.ctx;
  if (req.spec === undefined || !ctx.isCluster()) return false;
  const slot = ctx.router.slotOf(req.spec, req.args, ctx.commands());
  if (typeof slot !== 'number') return true; // several slots (a topology is known: the lane exists)
  if (slot < 0) return false;
  const node = ctx.router.primaryFor(slot);
  return node !== undefined && node.address !== lane.conn.address;
}

function sendOnLane(session: HandlerSession, lane: WatchLane, req: CommandRequest): void {
  const { command } = req;
  // Against a standalone server the lane's connection switches database (class comment).
  if (command === 'select' && keepsSelect(session)) return local(session, req);
  let ends = false;
  let afterReply: ((reply: Buffer) => void) | undefined;
  if (command === 'watch' && !lane.inMulti) for (let i = 1; i < req.args.length; i++) lane.watched.add(req.args[i]!.toString('latin1'));
  if (command === 'multi') {
    if (!lane.inMulti) {
      lane.queued = 0;
      lane.selects = null;
      lane.queuedNames = [];
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
  if (lane.inMulti && command !== 'multi' && command !== 'watch') {
    lane.queued++;
    lane.queuedNames.push(session.state.queuedReplyNames); // a popped key, KEYS … in EXEC's array as the client's
  }
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
      if (command === 'exec' && !discard) {
        lane.afterExec(reply);
        session.state.execRan(reply); // the commands it ran count as the client's (tot-cmds)
      }
      lane.end(reply[0] !== 0x2d /* an error leaves state unknown */);
    };
    const names = lane.queuedNames;
    lane.queuedNames = [];
    const answer = discard ? (reply: Buffer) => (reply[0] === 0x2d ? reply : EXEC_ABORT) : command === 'exec' ? (reply: Buffer) => execReplyNames(names, reply) : undefined;
    lane.send(raw, entry, afterReply, answer);
  });
}

const EXEC_ABORT = encodeError(ProxyError.execAbort());
