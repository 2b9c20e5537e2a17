import { commandFamily, type CommandFamily } from '../commands/proxy-handling.js';
import { CommandFlag } from '../commands/command-flags.js';
import type { CommandSpec } from '../commands/command-table.js';
import { admissionRefusal, refusalError, rejectCommand, Refusal } from './admission.js';
import type { RequestFrame } from '../resp/request-framer.js';
import { heldByPause } from '../client/client-pause.js';
import { isRespoolCommand } from '../hotkeys/control.js';
import { encodeError } from '../resp/encode.js';
import { ProxyError } from '../errors.js';
import type { DispatchedSession, Handler, HandlerSession, CommandRequest } from '../client/handler-session.js';
import { runsOnWatchLane } from './client-modes.js';
import { local } from './local.js';
import { clientCommands } from './client-commands.js';
import { info } from './info.js';
import { anyNode, keyed } from './keyed.js';
import { cluster } from './cluster.js';
import { multiKey } from './cross-slot/multi-key.js';
import { script } from './script.js';
import { noteScript } from '../scripts/script-cache.js';
import { allShards } from './all-shards.js';
import { NAMESPACE_SCOPED, namespaceScoped } from './namespace-scope.js';
import { refused } from './refused.js';
import { respool } from './respool.js';
import { transaction, queueInTransaction } from './transaction.js';
import { goesToLaneNode, onLane } from './watch-lane.js';
import { blocking } from './blocking.js';
import { feedMonitors, monitor, refusedWhileMonitoring } from './monitor.js';
import { isCommandlogCommand, observeReply } from './observe.js';
import { replication } from './replication.js';
import { pubsub, refuseWhileSubscribed } from './pubsub.js';
import { allowedWhileSubscribed } from './client-modes.js';
import { tracking, onTrackingLane } from './tracking.js';
import { markWrite, mayWriteCached } from './near-cache.js';
import { noteMigrationWrite } from './migration-writes.js';
import { ACL_DENIED_CMD, ACL_DENIED_KEY, aclErrorMessage, checkCommand, needsNodeCheck, type AclDenial } from '../acl/command-check.js';
import type { AclUser } from '../acl/rules.js';
import { clientInfoLine } from './client-commands.js';
import { touchesFleetKeys } from '../fleet/reserved-keys.js';
import { STORED_KEY_TOO_LONG, requestWithStoredNames } from '../keys/request-names.js';
import { replyNamesFor } from '../keys/reply-names.js';
import { onlyFixedKeysRenamed, untouchedByRules, withNamespacedKeys } from '../keys/naming-plan.js';
import { requestWithStoredChannels } from '../keys/channel-names.js';

/** The one dispatch table: command family → the handler that owns its decisions. */
const HANDLERS: Readonly<Record<CommandFamily, Handler>> = {
  local,
  info,
  transaction,
  cluster,
  clients: clientCommands,
  blocking,
  monitor,
  replication,
  tracking,
  pubsub,
  script,
  allShards,
  anyNode,
  keyed,
  multiKey,
  refused,
};

/**
 * Admits one request and hands it to its handler: the one admission pipeline, in Valkey's
 * processCommand order. The session (session/client-session.ts) keeps the order of requests;
 * everything decided about one request is decided here:
 *
 *   lookup    : the command table, straight from the frame's bytes (commands/command-table.ts)
 *   admission : unknown command or subcommand, arity, NOAUTH, no-multi — computed once
 *               (admission.ts); NOAUTH answered here, the others at the top of route()
 *   pause     : CLIENT PAUSE covers an admitted request the ACL allows (client/client-pause.ts
 *               heldByPause): false is returned, the session keeps the request and dispatches it
 *               again when the pause ends
 *   family    : computed once (commands/proxy-handling.ts), handed to the session (its latency
 *               series, the slow log), to route() and to MULTI's queueing
 *   then      : route() — the refusal, the ACL, respool's reserved keys, the client's modes, the
 *               family's handler
 *   after     : MONITOR's feed, the client's command count (CLIENT REPLY SKIP, tot-cmds)
 *
 * True when the request was handled (answered, queued, or on its way upstream).
 */
export function dispatch(session: DispatchedSession, frame: RequestFrame): boolean {
  const ctx = session.ctx;
  const state = session.state;
  const spec = ctx.commands().lookupFrame(frame);
  const inMulti = spec !== undefined && inTransaction(state);
  const refusal = admissionRefusal(spec, frame.argCount, state.user !== null, inMulti); // the count only: no argument views (resp/request-framer.ts)
  const command = spec?.name ?? frame.args[0]!.toString('latin1').toLowerCase();
  const req = frame as RequestFrame<CommandSpec>; // the frame is the request: no wrapper per request
  req.spec = spec;
  req.command = command;
  if (ctx.clientPause.active && refusal === Refusal.None && heldByPause(session, spec!, frame.args) && aclAllows(session, req)) return false; // one boolean on the hot path
  state.lastCommand = spec === undefined ? 'NULL' : spec.name; // CLIENT LIST cmd=
  if (state.user === null && (refusal === Refusal.NoAuth || (refusal === Refusal.UnknownCommand && isOwnCommand(frame.args[0]!)))) {
    session.replyNow(encodeError(ProxyError.noAuth()));
    return true;
  }
  const family: CommandFamily = spec === undefined ? 'keyed' : commandFamily(spec, frame);
  const blocking = family === 'blocking' && command !== 'client|unblock';
  const monitored = ctx.monitors.active; // MONITOR: one boolean on the hot path
  const tx = monitored ? state.transaction : null;
  const queued = inMulti && !NOT_QUEUED.has(command);
  // Under a namespace or colocation rules, the reply's key names turn back into the client's
  // (keys/reply-names.ts); a queued command's reply is QUEUED.
  const names = state.acl.keyNames;
  let replyNames = names !== null && spec !== undefined && !onlyFixedKeysRenamed(spec) ? replyNamesFor(names, command, frame.args) : null;
  // Queued, its names turn back in EXEC's array, long after these views of the read buffer are gone.
  if (inMulti && replyNames !== null) replyNames = replyNamesFor(names!, command, frame.args.map((a) => Buffer.from(a)));
  state.queuedReplyNames = inMulti ? replyNames : null;
  session.startRequest(req, family, blocking, inMulti ? null : replyNames);
  state.refusedNow = false;
  try {
    route(session, req, family, refusal);
  } finally {
    session.endRequest();
  }
  if (monitored && refusal === Refusal.None) feedMonitors(session, req, tx);
  // Valkey counts a command (tot-cmds) when call() ran it: not one admission refused, one refused
  // by the ACL or a client mode (refusedNow), one queued in MULTI (counted when EXEC runs it:
  // ClientState.execRan); a blocking one when it is served.
  state.commandDone(refusal === Refusal.None && !blocking && !queued && !state.refusedNow, blocking);
  return true;
}

/** Commands MULTI does not queue (Valkey's processCommand: they run at once, or are refused). */
const NOT_QUEUED: ReadonlySet<string> = new Set(['exec', 'discard', 'multi', 'watch', 'quit', 'reset']);

/** Inside MULTI: respool's transaction, or on a WATCH lane once its MULTI went out. */
function inTransaction(state: HandlerSession['state']): boolean {
  return state.transaction !== null || state.lane?.inMulti === true;
}

/** Valkey holds a paused command only once the ACL let it through (its pause comes last). */
function aclAllows(session: HandlerSession, req: CommandRequest): boolean {
  const acl = session.state.acl;
  return acl.unrestricted || aclVerdict(session, req, acl, Refusal.None) === null;
}

/** respool's own commands, unknown to Valkey's table: RESPOOL, and COMMANDLOG (Valkey 8.1's). */
function isOwnCommand(name: Buffer): boolean {
  return isRespoolCommand(name) || isCommandlogCommand(name);
}

/**
 * Whether respool answers an admission refusal itself. An unknown command goes to the node
 * outside MULTI (its table may know it); on a WATCH lane the node is the client's own connection:
 * it answers what goes there, and flags its own transaction as Valkey does.
 */
function answersRefusal(session: HandlerSession, req: CommandRequest, family: CommandFamily, refusal: Refusal): boolean {
  const state = session.state;
  if (refusal === Refusal.UnknownCommand) return state.transaction !== null && !isCommandlogCommand(req.args[0]!);
  return state.lane === null || !goesToLaneNode(session, family, req.command);
}

/**
 * An admitted request to its handler. Session modes come first (client-modes.ts says which family
 * runs where in each): after WATCH the request goes on the client's leased lane (watch-lane.ts);
 * inside MULTI the transaction handler queues everything but EXEC/DISCARD/MULTI/WATCH/QUIT/RESET;
 * a RESP2 client with subscriptions may only run the subscribe family, PING, QUIT and RESET
 * (Valkey's rule); with CLIENT TRACKING on, the request goes on the client's tracking lanes
 * (tracking.ts) unless its family keeps its own path.
 */
function route(session: HandlerSession, received: CommandRequest, family: CommandFamily, refusal: Refusal): void {
  let req = received;
  const spec = req.spec;
  const state = session.state;
  if (state.replicaStream) return; // a replica's REPLCONF ACK: Valkey answers a replica nothing (handlers/replication.ts)
  if (spec === undefined && isRespoolCommand(req.args[0]!)) return respool(session, req);
  if (refusal !== Refusal.None && answersRefusal(session, req, family, refusal)) return rejectCommand(session, req, refusalError(refusal, spec, req.args));
  // Users and permissions (src/acl): nothing to check for +@all ~* &* (no users configured, or such a user).
  const acl = state.acl;
  if (!acl.unrestricted && denied(session, req, acl, refusal)) return;
  // From here on the request names keys as the nodes store them (src/keys/key-names.ts); the ACL
  // above judged the client's names, MONITOR and the slow log show them.
  const maxKeyLength = session.ctx.config.limits.maxBulkLength;
  const names = spec === undefined ? null : acl.keyNames;
  let prefixed: RequestFrame | Buffer | null = null;
  if (names?.prefixOnly != null) prefixed = withNamespacedKeys(req as RequestFrame, spec!, names.prefixOnly, maxKeyLength);
  else if (names?.rulesOnly != null && untouchedByRules(req as RequestFrame, spec!, names.rulesOnly)) prefixed = req as RequestFrame;
  if (prefixed === STORED_KEY_TOO_LONG) return storedKeyTooLong(session);
  if (prefixed !== null) {
    req = prefixed as CommandRequest; // a GET, SET … : its keys renamed behind the namespace, or none a rule touches (keys/naming-plan.ts)
  } else if (spec !== undefined && acl.keyNames !== null) {
    const stored = requestWithStoredNames(acl.keyNames, session.ctx.commands(), spec, req as RequestFrame, maxKeyLength);
    if (stored === STORED_KEY_TOO_LONG) return storedKeyTooLong(session);
    if (Buffer.isBuffer(stored)) {
      if (state.transaction !== null) state.transaction.dirty = true; // EXEC aborts, as for any refused command
      state.refusedNow = true;
      return session.replyNow(stored);
    }
    req = stored as CommandRequest;
    if (acl.keyNames.namespace !== null) {
      // The whole keyspace's commands, for a namespace: its keys only; its channels behind it (the SUBSCRIBE family's at the hub: pubsub.ts).
      if (NAMESPACE_SCOPED.has(req.command)) {
        if (noteMigrationWrite(session, req, family)) return; // refused while a migration runs (handlers/migration-writes.ts)
        markWrite(session, req, family); // a namespace's FLUSHDB: the near cache's entries go first, as for any flush
        return namespaceScoped(session, req, acl.keyNames);
      }
      req = (requestWithStoredChannels(acl.keyNames, req.command, req as RequestFrame) ?? req) as CommandRequest;
    }
  }
  // A fleet's shared state is respool's: no client reads or writes it (src/fleet/reserved-keys.ts).
  if (spec !== undefined && session.ctx.fleetAcl != null && touchesFleetKeys(session.ctx.commands(), spec, req.args)) {
    if (state.transaction !== null) state.transaction.dirty = true; // EXEC will abort, as for a refused command
    state.refusedNow = true;
    return session.replyNow(encodeError(ProxyError.fleetKeysReserved()));
  }
  if (spec === undefined && isCommandlogCommand(req.args[0]!)) return session.replyNow(observeReply(session, 'commandlog', req.args));
  if (state.monitoring) {
    // A monitoring client is a replica to Valkey: no keyspace commands (handlers/monitor.ts).
    const refusal = refusedWhileMonitoring(spec);
    if (refusal !== null) {
      state.refusedNow = true;
      return session.replyNow(refusal);
    }
  }
  if (family === 'script' || family === 'allShards') noteScript(session.ctx.scripts, req.command, req.args); // EVAL / SCRIPT LOAD bodies, on every path
  // A write behind this client's reads that the near cache has not answered yet waits for them:
  // their fills run on another connection, and must not see it (handlers/near-cache.ts).
  if (state.cacheReadsPending > 0 && mayWriteCached(session, req, family)) {
    const kept: CommandRequest = { args: req.args.map((a) => Buffer.from(a)), raw: Buffer.from(req.raw), spec, command: req.command };
    return session.runExclusive(() => routeToFamily(session, kept, family));
  }
  routeToFamily(session, req, family);
}

/** route()'s last steps: the near cache's write mark, the client's modes, the family's handler. */
function routeToFamily(session: HandlerSession, req: CommandRequest, family: CommandFamily): void {
  const state = session.state;
  const spec = req.spec;
  if (noteMigrationWrite(session, req, family)) return; // a live migration copies what it writes (migration-writes.ts)
  markWrite(session, req, family); // the near cache drops what it writes before it leaves (near-cache.ts)
  state.tracking?.noteCommand(req.command, state.transaction !== null);
  if (state.lane !== null && runsOnWatchLane(family) && onLane(session, state.lane, req)) return; // false: keys on another node, outside MULTI
  if (state.transaction !== null && queueInTransaction(session, req, family)) return;
  session.ctx.trackedKeys?.noteCommand(req.command); // a flush empties it, as Valkey's tracking table (client/tracked-keys.ts)
  if (spec === undefined && state.tracking === null) return keyed(session, req); // unknown to respool's table: the upstream answers (or refuses) it
  if (state.subscribedResp2 && !allowedWhileSubscribed(req.command)) return refuseWhileSubscribed(session, req);
  if (state.tracking !== null && onTrackingLane(session, state.tracking, req, family)) return; // tracking.ts
  // Tracking lanes are leased in database 0: a client in another database is refused (SELECT 0 first).
  if (state.db !== 0 && req.command === 'client|tracking' && req.args.length >= 3 && req.args[2]!.toString('latin1').toLowerCase() === 'on') {
    return session.replyNow(encodeError(ProxyError.trackingOutsideDb0(state.db)));
  }
  HANDLERS[family](session, req);
}

/** A key over the nodes' bulk limit once renamed: Valkey's protocol error, and the client closed as Valkey closes it. */
function storedKeyTooLong(session: HandlerSession): void {
  session.state.refusedNow = true;
  session.replyNow(STORED_KEY_TOO_LONG);
  session.closeAfterReplies();
}

/**
 * Valkey's ACL check (server.c processCommand → ACLCheckAllPerm), before anything is forwarded:
 * after the arity check (a wrong arity keeps its own error), for every command including those
 * queued in MULTI (which then make EXEC abort) and while subscribed. A command unknown to
 * respool's table is let through only for a user given +@all (Valkey's "future commands") and
 * then only to the node's own check, as is every command respool cannot check completely (a
 * script, a function, SORT … GET): a restricted user without an upstream identity is refused them.
 * Denials go to ACL LOG.
 */
function denied(session: HandlerSession, req: CommandRequest, acl: AclUser, refusal: Refusal): boolean {
  const verdict = aclVerdict(session, req, acl, refusal);
  if (verdict === null) return false;
  const { denial, message } = verdict;
  const state = session.state;
  if (denial !== null) {
    const spec = req.spec;
    const object = denial.kind === ACL_DENIED_CMD ? (spec?.name ?? req.command) : req.args[denial.index]!.toString();
    const reason = denial.kind === ACL_DENIED_CMD ? 'command' : denial.kind === ACL_DENIED_KEY ? 'key' : 'channel';
    session.ctx.users.log.add(reason, state.transaction !== null ? 'multi' : 'toplevel', object, acl.name, clientInfoLine(session));
  }
  rejectCommand(session, req, ProxyError.noPerm(message));
  return true;
}

/** What the ACL says of a request, without acting on it: null when it may run. */
function aclVerdict(session: HandlerSession, req: CommandRequest, acl: AclUser, refusal: Refusal): { message: string; denial: AclDenial | null } | null {
  const spec = req.spec;
  if (spec === undefined) {
    if (acl.future && (acl.upstream !== null || (acl.allKeys && acl.allChannels))) return null;
    if (acl.future) return { message: ProxyError.needsUpstreamIdentity(req.command.toUpperCase(), acl.name), denial: null };
    const denial: AclDenial = { kind: ACL_DENIED_CMD, index: 0 };
    return { message: aclErrorMessage(denial, acl, req.command, undefined, false), denial };
  }
  if (refusal !== Refusal.None) return null; // on a WATCH lane: the node answers its refusal first
  const denial = checkCommand(acl, spec, req.args, session.ctx.commands());
  if (denial !== null) return { message: aclErrorMessage(denial, acl, spec.name, undefined, false), denial };
  if (acl.upstream !== null || !needsNodeCheck(spec, req.args)) return null;
  return { message: ProxyError.needsUpstreamIdentity(spec.name.toUpperCase(), acl.name), denial: null };
}
