// MONITOR: the command, and which requests the feed shows and when (client/monitor-feed.ts is the feed).
import { encodeError, encodeSimple } from '../resp/encode.js';
import { ProxyError } from '../errors.js';
import { RequestFrame } from '../resp/request-framer.js';
import { CommandFlag } from '../commands/command-flags.js';
import type { CommandSpec } from '../commands/command-table.js';
import { wrongArity } from '../commands/command-table.js';
import type { CommandRequest, Handler, HandlerSession } from '../client/handler-session.js';

import type { Transaction } from '../client/transaction-state.js';
import { checkCommand } from '../acl/command-check.js';

/** Commands a transaction runs at EXEC rather than when they are sent. */
const NOT_QUEUED: ReadonlySet<string> = new Set(['multi', 'exec', 'discard', 'watch', 'unwatch', 'quit', 'reset']);

/**
 * Called after each request was handled while someone monitors (dispatch, handlers/index.ts), with
 * the transaction the client was in before it: shows the request now, at EXEC (a queued command),
 * or never (rejected before it ran: unknown, wrong arity, refused by respool's ACL). After the
 * handler, so that a monitoring client sees its own command's line after its reply, as in Valkey.
 */
export function feedMonitors(session: HandlerSession, req: CommandRequest, tx: Transaction | null): void {
  const spec = req.spec;
  const state = session.state;
  if (spec === undefined || state.replicaStream) return; // dispatch feeds only what admission let through
  if (state.monitoring && refusedWhileMonitoring(spec) !== null) return;
  if (!state.acl.unrestricted && checkCommand(state.acl, spec, req.args, session.ctx.commands()) !== null) return;
  const feed = session.ctx.monitors;
  if (tx !== null && !NOT_QUEUED.has(spec.name)) return; // shown when EXEC runs it
  if (spec.name === 'exec' && tx !== null) {
    // Valkey's order: MULTI, the commands as they run, then EXEC; an aborted EXEC alone.
    if (!tx.dirty && !tx.crossSlot) {
      const table = session.ctx.commands();
      for (const q of tx.queued) {
        const s = table.get(q.command);
        if (s !== undefined && shown(s)) feed.feed(session, q.command, new RequestFrame(q.raw).args);
      }
    }
    feed.feed(session, 'exec', req.args);
    return;
  }
  if (shown(spec)) feed.feed(session, spec.name, req.args);
}

/** Scripts are flagged skip_monitor because Valkey feeds them itself, before they run (eval.c, functions.c). */
const FED_BY_THEMSELVES: ReadonlySet<string> = new Set(['eval', 'eval_ro', 'evalsha', 'evalsha_ro', 'fcall', 'fcall_ro']);

function shown(spec: CommandSpec): boolean {
  if (spec.flags & CommandFlag.ADMIN) return false;
  return (spec.flags & CommandFlag.SKIP_MONITOR) === 0 || FED_BY_THEMSELVES.has(spec.name);
}

/**
 * A monitoring client is a replica to Valkey: commands that read or write the keyspace are
 * refused ("Replica can't interact with the keyspace"); the error reply, or null to go on.
 */
export function refusedWhileMonitoring(spec: CommandSpec | undefined): Buffer | null {
  if (spec === undefined) return null;
  if ((spec.flags & (CommandFlag.READONLY | CommandFlag.WRITE | CommandFlag.MAY_REPLICATE)) === 0) return null;
  return encodeError(ProxyError.replicaKeyspace());
}

const OK = encodeSimple('OK');

/** MONITOR: from now on the client gets every line; a second MONITOR is ignored without a reply, as in Valkey. */
export const monitor: Handler = (session, req) => {
  const state = session.state;
  if (state.monitoring) return;
  state.monitoring = true;
  // +OK once the nodes' script lines are relayed too, so a script sent after it is seen whole;
  // lines of other clients meanwhile queue behind it. Off the feed at RESET (local.ts) or close (server.ts).
  const entry = session.reserve();
  void session.ctx.monitors.add(session).then(() => entry.fill(OK));
};
