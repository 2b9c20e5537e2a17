import { clientTrackingError, clientTrackingInfo, storedTrackingLine } from '../keys/tracking-names.js';
import { encodeCommand, encodeError, encodeInteger, encodeSimple } from '../resp/encode.js';
import { wrongArity } from '../commands/command-table.js';
import { CommandFlag } from '../commands/command-flags.js';
import { ProxyError } from '../errors.js';
import type { CommandFamily } from '../commands/proxy-handling.js';
import { ignoreReply, type LinkRequest } from '../upstream/link.js';
import type { LeasedConnection } from '../upstream/leased-connection.js';
import type { ReplyEntry } from '../client/reply-queue.js';
import type { CommandRequest, Handler, HandlerSession } from '../client/handler-session.js';
import { anyNode, keyed } from './keyed.js';
import { TRACKING_RESPOOL_ANSWERS, trackingPath } from './client-modes.js';
import { allShards } from './all-shards.js';
import { rewriteTrackingInfo, type TrackingLine } from '../client/tracking-redirect.js';
import { TrackingLanes, request, type TrackingOptions } from '../client/tracking-lanes.js';
import { blockItems, type BlockOutcome } from '../routing/transaction-block.js';

/**
 * CLIENT TRACKING (client-side caching) with invalidations delivered as RESP3 pushes on the
 * client's own connection. Keys are tracked per upstream connection, so a tracking client gets
 * connections of its own: one leased connection ("lane") per node it touches, each sent the
 * client's tracking options first; the lanes' `invalidate` pushes are the client's pushes.
 *
 *   opened by : CLIENT TRACKING ON [BCAST] [PREFIX p …] [OPTIN|OPTOUT] [NOLOOP] — a lease to one
 *               primary (every primary with BCAST), sent the client's own line: Valkey validates
 *               the options, its reply is the client's (an error drops the lanes). More lanes
 *               open lazily, sent the accumulated options, when a command needs another node; a
 *               BCAST client also gets lanes to primaries that appear later (in the background).
 *               A later ON goes to every lane (Valkey's checks against the current state).
 *   commands  : while tracking is on, keyed, keyless, script and multi-key commands go on the
 *               lane of the primary owning their slot (any lane for keyless ones), in order;
 *               opening a lane is a lane switch (runExclusive). MOVED/ASK are followed on the
 *               new owner's lane. Read strategies and split hot keys do not apply (a split key
 *               is refused: its copies would be neither written nor tracked); keys of several
 *               slots are CROSSSLOT (no splitting). MULTI … EXEC held by respool runs on the lane
 *               of its slot (transaction.ts), so reads inside it are tracked as on Valkey.
 *               Commands that keep their own paths: local ones (respool answers), blocking
 *               commands and WATCH … EXEC (their own leases: reads there are not tracked, and
 *               NOLOOP does not cover their writes), pub/sub, MONITOR; whole-data-set commands
 *               (KEYS, SCAN, DBSIZE, FLUSHALL … in a cluster) go on shared links after the
 *               client's earlier replies (barrier), as they read no keys Valkey would track.
 *   CACHING   : CLIENT CACHING YES|NO is checked here with Valkey's texts and remembered; it is
 *               sent on the lane just before the client's next command (dropped reply), and
 *               consumed by that command as Valkey's tracking_caching flag is (CLIENT commands
 *               and commands queued inside MULTI keep it for the next one / for EXEC).
 *   closed by : CLIENT TRACKING OFF (after earlier replies: barrier), RESET (once each lane's
 *               outstanding replies came back), the client's close, a protocol change (HELLO:
 *               the lanes speak the old protocol; new ones open lazily). Lanes are always closed,
 *               never reused: their tracking state is not reusable.
 *   lane lost : its in-flight commands fail; the client gets `invalidate` with a null key list
 *               (Valkey's "flush everything", as after FLUSHALL) since keys tracked there would
 *               no longer be invalidated; the next command to that node opens a new lane.
 *   RESP2     : tracking works (Valkey tracks the keys) but, as on Valkey without REDIRECT,
 *               no invalidation reaches a RESP2 connection.
 *   REDIRECT  : to a respool client id; each lane gets a listener connection on its node and
 *               is sent REDIRECT <listener's id>; the listener's pushes go to the respool client
 *               as Valkey would send them (tracking-redirect.ts).
 *   bounds    : the dedicated pool's (dedicated.maxPerNode, maxTotal, acquireTimeoutMs); each
 *               lane's oldest outstanding command may wait timeouts.commandMs; pushes count
 *               against pubsub.maxOutputBytesPerClient like pub/sub messages.
 */
export const tracking: Handler = (session, req) => {
  const spec = req.spec!;
  const n = req.args.length;
  switch (req.command) {
    case 'client|tracking':
      return clientTracking(session, req);
    case 'client|caching':
      return clientCaching(session, req);
    case 'client|getredir':
      // The respool id given to REDIRECT (0 without one) while tracking is on, -1 otherwise (as Valkey).
      return session.replyNow(session.state.tracking === null ? MINUS_ONE : encodeInteger(session.state.tracking.redirectTo));
    case 'client|trackinginfo':
      return trackingInfo(session, req);
    default:
      return session.replyNow(encodeError(ProxyError.notLocal(req.command)));
  }
};

const OK = encodeSimple('OK');
const MINUS_ONE = encodeInteger(-1);
const PING = encodeCommand(['PING']);
const TRACKINGINFO = encodeCommand(['CLIENT', 'TRACKINGINFO']);
const CACHING_YES = encodeCommand(['CLIENT', 'CACHING', 'yes']);
const CACHING_NO = encodeCommand(['CLIENT', 'CACHING', 'no']);

/**
 * CLIENT TRACKING ON|OFF [REDIRECT id] [BCAST] [PREFIX p …] [OPTIN] [OPTOUT] [NOLOOP], parsed in
 * Valkey's order (networking.c clientCommand): a syntax error where Valkey finds one; REDIRECT's
 * id must name a respool client that exists now (`exists`). The checks between options are
 * Valkey's (on a lane).
 */
export function parseTracking(
  args: readonly Buffer[],
  exists: (id: number) => boolean,
): { on: boolean; options: TrackingOptions; redirect: number; line: TrackingLine } | { error: string } {
  const options: TrackingOptions = { bcast: false, optin: false, optout: false, noloop: false, prefixes: [] };
  let redirect = 0;
  let redirectAt = -1;
  for (let j = 3; j < args.length; j++) {
    const more = args.length - 1 - j > 0;
    const option = args[j]!.toString('latin1').toLowerCase();
    if (option === 'redirect' && more) {
      j++;
      if (redirect !== 0) return { error: ProxyError.trackingRedirectTwice() };
      const text = args[j]!.toString('latin1');
      if (!/^-?\d{1,19}$/.test(text) || !Number.isSafeInteger(Number(text))) return { error: ProxyError.notAnInteger() };
      redirect = Number(text);
      redirectAt = j;
      if (!exists(redirect)) return { error: ProxyError.trackingRedirectNoClient() };
    } else if (option === 'bcast') options.bcast = true;
    else if (option === 'optin') options.optin = true;
    else if (option === 'optout') options.optout = true;
    else if (option === 'noloop') options.noloop = true;
    else if (option === 'prefix' && more) options.prefixes.push(Buffer.from(args[++j]!));
    else return { error: ProxyError.syntax() };
  }
  const mode = args[2]!.toString('latin1').toLowerCase();
  if (mode !== 'on' && mode !== 'off') return { error: ProxyError.syntax() };
  return { on: mode === 'on', options, redirect, line: { args: args.map((a) => Buffer.from(a)), redirectAt } };
}

/**
 * Every request of a tracking client (dispatch, after the session modes): true when it went on a
 * lane (or waits for one); false when its family keeps its own path.
 */
export function onTrackingLane(session: HandlerSession, lanes: TrackingLanes, req: CommandRequest, family: CommandFamily): boolean {
  const ctx = session.ctx;
  const path = trackingPath(family); // client-modes.ts
  const respoolAnswers = TRACKING_RESPOOL_ANSWERS.has(req.command);
  if ((path === 'shared' && ctx.isCluster() && req.spec !== undefined) || respoolAnswers) {
    // Fan-out on shared links (or respool's own answer), once the lanes have answered everything before it (order).
    const copy: CommandRequest = { ...req, args: req.args.map((a) => Buffer.from(a)), raw: Buffer.from(req.raw) };
    session.runExclusive(() => (family === 'allShards' ? allShards : anyNode)(session, copy));
    return true;
  }
  if (path === 'own') return false;
  const slot = ctx.router.slotOf(req.spec, req.args, ctx.commands());
  if (typeof slot !== 'number') {
    session.replyNow(slot);
    return true;
  }
  const hook = ctx.router.keyedHook;
  if (slot >= 0 && hook !== null && req.spec !== undefined) {
    const keys = ctx.commands().keyIndexes(req.spec, req.args);
    if (hook.refuseInTransaction(req.args, keys, slot, req.command) !== null) {
      session.replyNow(encodeError(ProxyError.trackingSplitKey(req.command)));
      return true;
    }
  }
  lanes.ensureBcast();
  ctx.metrics?.commandCounter(req.command).inc();
  const caching = lanes.current;
  const reads = readKeyIndexes(session, req);
  if (reads !== null) lanes.noteRead(reads.map((i) => req.args[i]!), caching); // respool's tracking table (client/tracked-keys.ts): views, read at once
  const raw = Buffer.from(req.raw);
  const command = req.command;
  onLaneFor(session, lanes, slot, (conn, entry) => lanes.send(conn, raw, caching, command, (reply) => entry.fill(reply)));
  return true;
}

/** Read-only scripts: Valkey tracks the keys of the commands they call, not theirs (server.c call()). */
const SCRIPTS_READING = new Set(['eval_ro', 'evalsha_ro', 'fcall_ro']);

/** Where the keys are that a read-only command of a tracking client has the node track, or null. */
function readKeyIndexes(session: HandlerSession, req: CommandRequest): number[] | null {
  const spec = req.spec;
  if (spec === undefined || (spec.flags & CommandFlag.READONLY) === 0 || SCRIPTS_READING.has(req.command)) return null;
  return session.ctx.commands().keyIndexes(spec, req.args);
}

/**
 * The keys (copied) a read-only command of a tracking client has the node track, or null: for a
 * command queued inside MULTI (QueuedCommand.reads), kept past its request (whose buffer is reused).
 */
export function keysRead(session: HandlerSession, req: CommandRequest): Buffer[] | null {
  const indexes = readKeyIndexes(session, req);
  return indexes === null ? null : indexes.map((i) => Buffer.from(req.args[i]!));
}

/**
 * Runs `use` with the lane for `slot` (the slot's primary; any lane for -1) and a new reply
 * entry: at once when the lane is open, else as a lane switch (later requests wait).
 */
function onLaneFor(session: HandlerSession, lanes: TrackingLanes, slot: number, use: (conn: LeasedConnection, entry: ReplyEntry) => void): void {
  const ctx = session.ctx;
  let conn = slot < 0 ? lanes.anyLane() : undefined;
  let node = conn === undefined ? ctx.router.primaryFor(slot) : undefined;
  if (conn === undefined) {
    if (node === undefined) return session.replyNow(encodeError(slot < 0 ? ProxyError.topologyUnknown() : ProxyError.slotNotServed(slot)));
    conn = lanes.ready(node.address);
  }
  if (conn !== undefined) return use(conn, session.reserve());
  const target = node!;
  session.runExclusive(() => {
    const entry = session.reserve();
    lanes.lane(target.host, target.port).then(
      (c) => use(c, entry),
      (err: Error) => entry.fill(encodeError(err.message)),
    );
  });
}

/**
 * MULTI … EXEC held by respool, for a tracking client: the block goes on the lane of its slot
 * (after the CACHING line that applies to EXEC), so reads inside it are tracked (`reads`: their
 * keys, for respool's tracking table). `items` builds
 * the block for the entry that EXEC's reply fills.
 */
export function sendBlockOnTrackingLane(session: HandlerSession, lanes: TrackingLanes, slot: number, reads: readonly Buffer[], items: (entry: ReplyEntry) => ReadonlyArray<{ data: Buffer; req: LinkRequest }>): void {
  const caching = lanes.current;
  lanes.ensureBcast();
  lanes.noteRead(reads, caching);
  onLaneFor(session, lanes, slot, (conn, entry) => {
    if (caching !== null) conn.send(caching, ignoreReply());
    for (const { data, req } of items(entry)) conn.send(data, req);
  });
}

/**
 * One piece of a transaction run in pieces (transaction-apart.ts), for a tracking client: as
 * sendBlockOnTrackingLane, without a reply entry of its own — `done` gets the block's outcome
 * (the lane's failure to open as a block that was not written).
 */
export function blockOnTrackingLane(session: HandlerSession, lanes: TrackingLanes, slot: number, reads: readonly Buffer[], commands: readonly Buffer[], done: (outcome: BlockOutcome) => void): void {
  const caching = lanes.current;
  lanes.ensureBcast();
  lanes.noteRead(reads, caching);
  const send = (conn: LeasedConnection): void => {
    if (caching !== null) conn.send(caching, ignoreReply());
    for (const { data, req } of blockItems(commands, conn.address, (o) => done(o))) conn.send(data, req);
  };
  const ready = slot < 0 ? lanes.anyLane() : undefined;
  if (ready !== undefined) return send(ready);
  const node = session.ctx.router.primaryFor(slot);
  if (node === undefined) return done({ kind: 'failed', error: slot < 0 ? ProxyError.topologyUnknown() : ProxyError.slotNotServed(slot), written: false, node: '' });
  const open = lanes.ready(node.address);
  if (open !== undefined) return send(open);
  lanes.lane(node.host, node.port).then(send, (err: Error) => done({ kind: 'failed', error: err.message, written: false, node: node.address }));
}

/** CLIENT TRACKING ON|OFF … */
function clientTracking(session: HandlerSession, req: CommandRequest): void {
  const parsed = parseTracking(req.args, (id) => session.ctx.sessionById(id) !== undefined);
  if ('error' in parsed) return session.replyNow(encodeError(parsed.error));
  // Under a namespace or colocation rules, BCAST's prefixes are the stored names' (keys/tracking-names.ts).
  const names = session.state.acl.keyNames;
  if (names != null && parsed.options.bcast) parsed.line = storedTrackingLine(names, parsed.line);
  const state = session.state;
  const current = state.tracking;
  if (!parsed.on) {
    if (current === null) return session.replyNow(OK); // as Valkey: OFF when off is fine
    // After the lanes answered everything before it; its state is gone with the connections.
    return session.runExclusive(() => {
      current.close(false);
      if (state.tracking === current) state.tracking = null;
      session.replyNow(OK);
    });
  }
  const ctx = session.ctx;
  session.runExclusive(() => {
    const entry = session.reserve();
    if (current === null) {
      // First ON: a lane per primary with BCAST, else one lane (any primary). Each is sent the
      // client's own line; Valkey's verdict is the reply, and an error leaves tracking off.
      const lanes = new TrackingLanes(session, parsed.options, parsed.redirect);
      const topology = ctx.router.topology();
      const any = ctx.router.primaryFor(-1);
      const nodes = topology === null ? [] : parsed.options.bcast ? topology.primaries() : any === undefined ? [] : [any];
      if (nodes.length === 0) return entry.fill(encodeError(ProxyError.topologyUnknown()));
      Promise.all(nodes.map((n) => lanes.lane(n.host, n.port, parsed.line))).then(
        () => {
          if (session.closed) return lanes.close(false);
          state.tracking = lanes;
          entry.fill(OK);
        },
        (err: Error) => {
          lanes.close(false);
          entry.fill(encodeError(names === null ? err.message : clientTrackingError(names, parsed.options.prefixes, err.message)));
        },
      );
      return;
    }
    // Tracking already on: the line goes to every lane (Valkey checks it against their state).
    void (async () => {
      await Promise.allSettled(current.pendingOpens());
      if (current.laneCount === 0) {
        const node = ctx.router.primaryFor(-1);
        if (node === undefined) return entry.fill(encodeError(ProxyError.topologyUnknown()));
        try {
          await current.lane(node.host, node.port);
        } catch (err) {
          return entry.fill(encodeError((err as Error).message));
        }
      }
      const conns = current.openLanes();
      const replies = await Promise.all(conns.map(async (c) => request(c, await current.lineFor(c, parsed.line)).catch((err: Error) => encodeError(err.message))));
      const accepted = replies[0]![0] !== 0x2d;
      if (accepted) current.accept(parsed.options, parsed.redirect);
      // A lane that answered differently from the first no longer shares the client's state.
      replies.forEach((r, i) => {
        if ((r[0] !== 0x2d) !== accepted) current.drop(conns[i]!, false);
      });
      const reply = replies[0]!;
      if (accepted || names === null) return entry.fill(reply);
      const prefixes = [...current.clientPrefixes(), ...parsed.options.prefixes];
      entry.fill(encodeError(clientTrackingError(names, prefixes, reply.toString('utf8', 1, reply.length - 2))));
    })();
  });
}

/** CLIENT CACHING YES|NO: Valkey's checks (networking.c), then remembered for the next command. */
function clientCaching(session: HandlerSession, req: CommandRequest): void {
  const lanes = session.state.tracking;
  if (lanes === null) return session.replyNow(encodeError(ProxyError.cachingNotTracking()));
  const option = req.args[2]!.toString('latin1').toLowerCase();
  if (option === 'yes') {
    if (!lanes.options.optin) return session.replyNow(encodeError(ProxyError.cachingYesNotOptin()));
    lanes.caching = CACHING_YES;
  } else if (option === 'no') {
    if (!lanes.options.optout) return session.replyNow(encodeError(ProxyError.cachingNoNotOptout()));
    lanes.caching = CACHING_NO;
  } else {
    return session.replyNow(encodeError(ProxyError.syntax()));
  }
  session.replyNow(OK);
}

/**
 * CLIENT TRACKINGINFO: tracking off → any node's answer on a shared link (tracking is off there
 * too); on → a lane's, which holds the client's tracking state (a pending CACHING is shown as
 * Valkey shows it, then cleared on the lane with a PING so it applies to nothing else).
 */
function trackingInfo(session: HandlerSession, req: CommandRequest): void {
  const lanes = session.state.tracking;
  if (lanes === null) return keyed(session, req);
  const caching = lanes.caching;
  onLaneFor(session, lanes, -1, (conn, entry) => {
    if (caching !== null) conn.send(caching, ignoreReply());
    conn.send(TRACKINGINFO, {
      sentAt: 0,
      onReply: (frame) => {
        const info = rewriteTrackingInfo(Buffer.from(frame), lanes.redirectTo, lanes.brokenRedirect);
        // Under a namespace or colocation rules the lane holds the prefixes' stored forms.
        entry.fill(session.state.acl.keyNames == null ? info : clientTrackingInfo(info, lanes.options.bcast, lanes.clientPrefixes()));
      },
      onLinkFailure: (error) => entry.fill(encodeError(error)),
    });
    if (caching !== null) conn.send(PING, ignoreReply());
  });
}
