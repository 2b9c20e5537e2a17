import { encodeError, encodeSimple } from '../resp/encode.js';
import { ProxyError } from '../errors.js';
import { RequestFrame } from '../resp/request-framer.js';
import { CommandFlag } from '../commands/command-flags.js';
import type { CommandSpec } from '../commands/command-table.js';
import { clientAddr, type ListedClient } from './client-commands.js';
import { shownArgs } from './redact.js';
import type { CommandRequest, Handler, HandlerSession } from './types.js';
import type { Transaction } from './transaction-state.js';
import { checkCommand } from '../acl/command-check.js';

/**
 * MONITOR, answered by respool from what its clients send: each command once, as the client sent
 * it (its case, its arguments, secrets redacted as Valkey does), with the client's own address
 * and database, in Valkey 8.0.1's line format (replicationFeedMonitors):
 *
 *   +1700000000.123456 [0 127.0.0.1:53422] "set" "k" "v"
 *
 * Nothing respool sends on its own (topology refreshes, INFO for a client's INFO, MULTI … EXEC
 * blocks, replicas' copies of writes) appears, since no node is monitored. Valkey's rules for
 * what is shown: not unknown commands or wrong arities (rejected before they run), not commands
 * flagged admin or skip_monitor (CONFIG, MONITOR, …), commands queued in MULTI when EXEC runs
 * them, then EXEC. Commands a script runs on a node ("[0 lua]" lines) are not shown.
 */
export class MonitorFeed {
  private readonly clients = new Set<HandlerSession>();

  /** True while someone monitors: the one test every request pays. */
  get active(): boolean {
    return this.clients.size > 0;
  }

  add(session: HandlerSession): void {
    this.clients.add(session);
  }

  remove(session: HandlerSession): void {
    this.clients.delete(session);
  }

  /** One line for `args`, sent by `from`, to every monitoring client. */
  feed(from: HandlerSession, command: string, args: readonly Buffer[]): void {
    const line = monitorLine(from.state.db, clientAddr(from as ListedClient), shownArgs(command, args));
    for (const client of this.clients) client.push(line);
  }
}

/** Valkey's sdscatrepr: quoted, `\\ \" \n \r \t \a \b` escaped, other non-printable bytes as \xHH. */
export function repr(arg: Buffer): string {
  let out = '"';
  for (const c of arg) {
    if (c === 0x5c) out += '\\\\';
    else if (c === 0x22) out += '\\"';
    else if (c === 0x0a) out += '\\n';
    else if (c === 0x0d) out += '\\r';
    else if (c === 0x09) out += '\\t';
    else if (c === 0x07) out += '\\a';
    else if (c === 0x08) out += '\\b';
    else if (c >= 0x20 && c < 0x7f) out += String.fromCharCode(c);
    else out += `\\x${c.toString(16).padStart(2, '0')}`;
  }
  return `${out}"`;
}

/** One MONITOR line, `+<seconds>.<microseconds> [<db> <addr>] "arg" …\r\n`. */
export function monitorLine(db: number, addr: string, args: readonly Buffer[]): Buffer {
  const micros = Math.floor((performance.timeOrigin + performance.now()) * 1000);
  const seconds = Math.floor(micros / 1_000_000);
  return Buffer.from(`+${seconds}.${String(micros % 1_000_000).padStart(6, '0')} [${db} ${addr}] ${args.map(repr).join(' ')}\r\n`, 'latin1');
}

/** Commands a transaction runs at EXEC rather than when they are sent. */
const NOT_QUEUED: ReadonlySet<string> = new Set(['multi', 'exec', 'discard', 'watch', 'unwatch', 'quit', 'reset']);

/**
 * Called after each request was handled while someone monitors (session/client-session.ts), with
 * the transaction the client was in before it: shows the request now, at EXEC (a queued command),
 * or never (rejected before it ran: unknown, wrong arity, refused by respool's ACL). After the
 * handler, so that a monitoring client sees its own command's line after its reply, as in Valkey.
 */
export function feedMonitors(session: HandlerSession, req: CommandRequest, tx: Transaction | null): void {
  const spec = req.spec;
  const state = session.state;
  if (spec === undefined || state.replicaStream || wrongArity(spec, req.args.length)) return;
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

function wrongArity(spec: CommandSpec, argc: number): boolean {
  return (spec.arity > 0 && spec.arity !== argc) || argc < -spec.arity;
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
  if (req.args.length !== 1) return session.replyNow(encodeError(ProxyError.wrongArity('monitor')));
  const state = session.state;
  if (state.monitoring) return;
  state.monitoring = true;
  session.ctx.monitors.add(session); // off the feed at RESET (local.ts) or close (server.ts onSessionClosed)
  session.replyNow(OK);
};
