import { commandFamily, type CommandFamily } from '../commands/proxy-handling.js';
import { isRespoolCommand } from '../hotkeys/control.js';
import { encodeError } from '../resp/encode.js';
import { ProxyError } from '../errors.js';
import type { Handler, HandlerSession, CommandRequest } from './types.js';
import { local } from './local.js';
import { clientCommands } from './client-commands.js';
import { info } from './info.js';
import { anyNode, keyed } from './keyed.js';
import { cluster } from './cluster.js';
import { multiKey } from './multi-key.js';
import { script } from './script.js';
import { noteScript } from './script-cache.js';
import { allShards } from './all-shards.js';
import { refused } from './refused.js';
import { respool } from './respool.js';
import { transaction, queueInTransaction } from './transaction.js';
import { onLane } from './leased-lane.js';
import { blocking } from './blocking.js';
import { monitor, refusedWhileMonitoring } from './monitor.js';
import { isCommandlogCommand, observeReply } from './observe.js';
import { replication } from './replication.js';
import { pubsub, allowedWhileSubscribed, refuseWhileSubscribed } from './pubsub.js';
import { tracking, onTrackingLane } from './tracking.js';
import { ACL_DENIED_CMD, ACL_DENIED_KEY, aclErrorMessage, checkCommand, needsNodeCheck, wrongArity, type AclDenial } from '../acl/command-check.js';
import type { AclUser } from '../acl/rules.js';
import { clientInfoLine } from './client-commands.js';
import { touchesFleetKeys } from '../fleet/reserved-keys.js';

/** Families that keep their own path while a WATCH lane is open (they would corrupt the lease's state). */
const OFF_LANE: ReadonlySet<CommandFamily> = new Set(['pubsub', 'tracking', 'monitor', 'replication', 'refused', 'clients', 'cluster']);

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
 * Hands one request to its handler. Session modes come first: after WATCH everything but the
 * subscribe family goes on the client's leased lane (leased-lane.ts); inside MULTI the transaction
 * handler queues everything but EXEC/DISCARD/MULTI/WATCH/QUIT/RESET; a RESP2 client with
 * subscriptions may only run the subscribe family, PING, QUIT and RESET (Valkey's rule); with
 * CLIENT TRACKING on, keyed and keyless commands go on the client's tracking lanes (tracking.ts).
 */
export function dispatch(session: HandlerSession, req: CommandRequest): void {
  const spec = req.spec;
  const state = session.state;
  if (state.replicaStream) return; // a replica's REPLCONF ACK: Valkey answers a replica nothing (handlers/replication.ts)
  if (spec === undefined && isRespoolCommand(req.args[0]!)) return respool(session, req);
  // Users and permissions (src/acl): nothing to check for +@all ~* &* (no users configured, or such a user).
  const acl = state.acl;
  if (!acl.unrestricted && denied(session, req, acl)) return;
  // A fleet's shared state is respool's: no client reads or writes it (src/fleet/reserved-keys.ts).
  if (spec !== undefined && session.ctx.fleetAcl != null && touchesFleetKeys(session.ctx.commands(), spec, req.args)) {
    if (state.transaction !== null) state.transaction.dirty = true; // EXEC will abort, as for a refused command
    return session.replyNow(encodeError(ProxyError.fleetKeysReserved()));
  }
  if (spec === undefined && isCommandlogCommand(req.args[0]!)) return session.replyNow(observeReply(session, 'commandlog', req.args));
  if (state.monitoring) {
    // A monitoring client is a replica to Valkey: no keyspace commands (handlers/monitor.ts).
    const refusal = refusedWhileMonitoring(spec);
    if (refusal !== null) return session.replyNow(refusal);
  }
  const family = spec === undefined ? 'keyed' : commandFamily(spec, req);
  if (family === 'script' || family === 'allShards') noteScript(session.ctx.scripts, req); // EVAL / SCRIPT LOAD bodies, on every path
  state.tracking?.noteCommand(req.command, state.transaction !== null);
  if (state.lane !== null && !OFF_LANE.has(family) && onLane(session, state.lane, req)) return; // false: keys on another node, outside MULTI
  if (state.transaction !== null && queueInTransaction(session, req)) return;
  if (spec === undefined && state.tracking === null) return keyed(session, req); // unknown to respool's table: the upstream answers (or refuses) it
  if (state.subscribedResp2 && !allowedWhileSubscribed(req.command)) {
    // Valkey checks the arity before the subscribed context.
    if (spec !== undefined && ((spec.arity > 0 && spec.arity !== req.args.length) || req.args.length < -spec.arity)) return session.replyNow(encodeError(ProxyError.wrongArity(spec.name)));
    return refuseWhileSubscribed(session, req);
  }
  if (state.tracking !== null && onTrackingLane(session, state.tracking, req, family)) return; // tracking.ts
  // Tracking lanes are leased in database 0: a client in another database is refused (SELECT 0 first).
  if (state.db !== 0 && req.command === 'client|tracking' && req.args.length >= 3 && req.args[2]!.toString('latin1').toLowerCase() === 'on') {
    return session.replyNow(encodeError(ProxyError.trackingOutsideDb0(state.db)));
  }
  HANDLERS[family](session, req);
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
function denied(session: HandlerSession, req: CommandRequest, acl: AclUser): boolean {
  const spec = req.spec;
  let message: string;
  let denial: AclDenial | null = null;
  if (spec === undefined) {
    if (acl.future && (acl.upstream !== null || (acl.allKeys && acl.allChannels))) return false;
    if (acl.future) message = ProxyError.needsUpstreamIdentity(req.command.toUpperCase(), acl.name);
    else {
      denial = { kind: ACL_DENIED_CMD, index: 0 };
      message = aclErrorMessage(denial, acl, req.command, undefined, false);
    }
  } else {
    if (wrongArity(spec, req.args.length)) return false;
    denial = checkCommand(acl, spec, req.args, session.ctx.commands());
    if (denial === null) {
      if (acl.upstream !== null || !needsNodeCheck(spec, req.args)) return false;
      message = ProxyError.needsUpstreamIdentity(spec.name.toUpperCase(), acl.name);
    } else {
      message = aclErrorMessage(denial, acl, spec.name, undefined, false);
    }
  }
  const state = session.state;
  if (denial !== null) {
    const object = denial.kind === ACL_DENIED_CMD ? (spec?.name ?? req.command) : req.args[denial.index]!.toString();
    const reason = denial.kind === ACL_DENIED_CMD ? 'command' : denial.kind === ACL_DENIED_KEY ? 'key' : 'channel';
    session.ctx.users.log.add(reason, state.transaction !== null ? 'multi' : 'toplevel', object, acl.name, clientInfoLine(session));
  }
  if (req.command === 'exec' && state.lane === null) {
    // Valkey's rejectCommand for EXEC: execCommandAbort (the transaction, if any, is discarded).
    state.transaction = null;
    session.replyNow(encodeError(ProxyError.execAbortBecause(ProxyError.noPerm(message))));
    return true;
  }
  if (state.transaction !== null) state.transaction.dirty = true; // EXEC will abort (flagTransaction)
  session.replyNow(encodeError(ProxyError.noPerm(message)));
  return true;
}
