// What Valkey refuses before it runs (or queues) a command: the one place these rules are written.
import { CommandFlag } from '../commands/command-flags.js';
import { arityError, wrongArity, type CommandSpec } from '../commands/command-table.js';
import { ProxyError } from '../errors.js';
import { encodeError } from '../resp/encode.js';
import type { CommandRequest, HandlerSession } from '../client/handler-session.js';

/**
 * Valkey's processCommand checks, in its order (server.c: commandCheckExistence,
 * commandCheckArity, authRequired, CMD_NO_MULTI). Computed once per request by dispatch
 * (handlers/index.ts), which answers it; MULTI's queueing (transaction.ts) and CLIENT PAUSE
 * (client/client-pause.ts) read the same answer. The ACL check and the pause come after, in that
 * order, in dispatch.
 *
 *   UnknownCommand    : not in respool's table. An authenticated client's goes to the node outside
 *                       MULTI (the node's table may hold commands respool's lacks: modules')
 *   UnknownSubcommand : a container command (CLIENT, CONFIG …) with a subcommand the table lacks
 *   WrongArity        : the table's arity (commands/command-table.ts wrongArity)
 *   NoAuth            : before AUTH only the table's no_auth commands (AUTH, HELLO, QUIT, RESET)
 *   NoMulti           : inside MULTI, a command flagged no_multi
 */
export const enum Refusal {
  None = 0,
  UnknownCommand,
  UnknownSubcommand,
  WrongArity,
  NoAuth,
  NoMulti,
}

export function admissionRefusal(spec: CommandSpec | undefined, argCount: number, authenticated: boolean, inMulti: boolean): Refusal {
  if (spec === undefined) return Refusal.UnknownCommand;
  // lookup() answers the container itself when its subcommand is unknown.
  if (spec.subcommands !== undefined && argCount > 1 && spec.name.indexOf('|') < 0) return Refusal.UnknownSubcommand;
  if (wrongArity(spec, argCount)) return Refusal.WrongArity;
  if (!authenticated && (spec.flags & CommandFlag.NO_AUTH) === 0) return Refusal.NoAuth;
  if (inMulti && (spec.flags & CommandFlag.NO_MULTI) !== 0) return Refusal.NoMulti;
  return Refusal.None;
}

/** The error line for a refusal (not Refusal.None), as Valkey words it. */
export function refusalError(refusal: Refusal, spec: CommandSpec | undefined, args: readonly Buffer[]): string {
  switch (refusal) {
    case Refusal.UnknownCommand:
      return ProxyError.unknownCommand(args);
    case Refusal.UnknownSubcommand:
      return ProxyError.unknownSubcommand(args[1]!.toString('utf8'), spec!.name);
    case Refusal.WrongArity:
      return arityError(spec!, args.length)!;
    case Refusal.NoAuth:
      return ProxyError.noAuth();
    default:
      return ProxyError.notAllowedInMulti();
  }
}

/**
 * Valkey's rejectCommand: the error for a command refused before it ran (admission, the ACL).
 * Inside respool's MULTI the transaction is flagged (EXEC aborts: flagTransaction); a refused EXEC
 * aborts the transaction with the error (execCommandAbort). On a WATCH lane EXEC goes to the node.
 */
export function rejectCommand(session: HandlerSession, req: CommandRequest, error: string): void {
  const state = session.state;
  state.refusedNow = true;
  if (req.command === 'exec' && state.lane === null) {
    state.transaction = null;
    return session.replyNow(encodeError(ProxyError.execAbortBecause(error)));
  }
  if (state.transaction !== null) state.transaction.dirty = true;
  session.replyNow(encodeError(error));
}
