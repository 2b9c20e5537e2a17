import { encodeArray, encodeBulk, encodeError, encodeInteger, encodeMap, encodeSimple } from '../resp/encode.js';
import { arityError, type ArityRule } from '../commands/command-table.js';
import { ProxyError } from '../errors.js';
import type { CommandLog, CommandLogEntry, CommandLogType } from '../observe/command-log.js';
import type { LatencyHistogram } from '../metrics/latency-histogram.js';
import type { HandlerSession } from '../client/handler-session.js';

/**
 * SLOWLOG, COMMANDLOG (Valkey 8.1's) and LATENCY HISTOGRAM answered from respool's own logs and
 * histograms (observe/request-observer.ts): the requests as respool's clients saw them (receive →
 * reply written), not one node's. Formats and errors as Valkey's slowlog.c, commandlog.c and
 * latency.c; also answered at EXEC inside MULTI (local.ts localReply).
 */
export const OBSERVE_COMMANDS: ReadonlySet<string> = new Set([
  'slowlog|get', 'slowlog|len', 'slowlog|reset', 'slowlog|help', 'latency|histogram',
  'commandlog|get', 'commandlog|len', 'commandlog|reset', 'commandlog|help',
]);

/** COMMANDLOG (Valkey 8.1+) by its name bytes: 8.0.1's command table does not know it. */
export function isCommandlogCommand(name: Buffer): boolean {
  return name.length === 10 && name.toString('latin1').toLowerCase() === 'commandlog';
}

const OK = encodeSimple('OK');

const SLOWLOG_HELP = [
  'GET [<count>]',
  '    Return top <count> entries from the slowlog (default: 10, -1 mean all).',
  '    Entries are made of:',
  '    id, timestamp, time in microseconds, arguments array, client IP and port,',
  '    client name',
  'LEN',
  '    Return the length of the slowlog.',
  'RESET',
  '    Reset the slowlog.',
];

const COMMANDLOG_HELP = [
  'GET <count> <type>',
  '    Return top <count> entries of the specified <type> from the commandlog (-1 mean all).',
  '    Entries are made of:',
  '    id, timestamp,',
  '        time in microseconds for type of slow,',
  '        or size in bytes for type of large-request,',
  '        or size in bytes for type of large-reply',
  '    arguments array, client IP and port,',
  '    client name',
  'LEN <type>',
  '    Return the length of the specified type of commandlog.',
  'RESET <type>',
  '    Reset the specified type of commandlog.',
];

/** Valkey 8.1's arities for COMMANDLOG's subcommands (8.0.1's table does not know the command). */
const COMMANDLOG_ARITY: Readonly<Record<string, number>> = { get: 4, len: 3, reset: 3, help: 2 };
/** COMMANDLOG itself: a container (Valkey 8.1's table; respool's own before 8.1). */
const COMMANDLOG: ArityRule = { name: 'commandlog', arity: -2 };

/** Valkey's addReplyHelp: a header, the lines, HELP. */
function help(name: string, lines: readonly string[]): Buffer {
  return encodeArray([`${name} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:`, ...lines, 'HELP', '    Print this help.'].map(encodeSimple));
}

/** getRangeLongFromObjectOrReply(…, -1, LONG_MAX, "count should be greater than or equal to -1"). */
function parseCount(arg: Buffer): number | null {
  const text = arg.toString('latin1');
  if (!/^-?\d{1,19}$/.test(text) || (text.length > 1 && /^-?0/.test(text))) return null;
  const n = Number(text);
  return n < -1 || !Number.isSafeInteger(n) ? null : n;
}

/** One entry as Valkey replies it: id, timestamp, value, arguments, client address, client name. */
export function logEntryReply(e: CommandLogEntry, protocol: 2 | 3): Buffer {
  return encodeArray([
    encodeInteger(e.id),
    encodeInteger(e.time),
    encodeInteger(e.value),
    encodeArray(e.args.map((a) => encodeBulk(a, protocol))),
    encodeBulk(e.client, protocol),
    encodeBulk(e.clientName, protocol),
  ]);
}

function getReply(log: CommandLog, count: number, protocol: 2 | 3): Buffer {
  return encodeArray(log.newest(count).map((e) => logEntryReply(e, protocol)));
}

/** The reply to one of OBSERVE_COMMANDS (`command` the table name, `args` as sent). */
export function observeReply(session: HandlerSession, command: string, args: readonly Buffer[]): Buffer {
  const observer = session.ctx.observer;
  const protocol = session.state.protocol;
  if (observer === undefined) return encodeError(ProxyError.notLocal(command));
  const slow = observer.logs.slow;
  switch (command) {
    case 'slowlog|help':
      return help('SLOWLOG', SLOWLOG_HELP);
    case 'slowlog|len':
      return encodeInteger(slow.length);
    case 'slowlog|reset':
      slow.reset();
      return OK;
    case 'slowlog|get': {
      if (args.length > 3) return encodeError(ProxyError.subcommandSyntax('SLOWLOG', args[1]!.toString('latin1')));
      const count = args.length === 3 ? parseCount(args[2]!) : 10;
      if (count === null) return encodeError(ProxyError.countAtLeastMinusOne());
      return getReply(slow, count, protocol);
    }
    case 'latency|histogram':
      return latencyHistogram(session, args, protocol);
    default:
      return commandlog(session, args, protocol);
  }
}

/** COMMANDLOG GET <count> <type> | LEN <type> | RESET <type> | HELP, as Valkey 8.1's commandlogCommand. */
function commandlog(session: HandlerSession, args: readonly Buffer[], protocol: 2 | 3): Buffer {
  const tooFew = arityError(COMMANDLOG, args.length);
  if (tooFew !== null) return encodeError(tooFew);
  const sub = args[1]!.toString('latin1').toLowerCase();
  const arity = COMMANDLOG_ARITY[sub];
  if (arity === undefined) return encodeError(ProxyError.unknownSubcommand(args[1]!.toString('latin1'), 'COMMANDLOG'));
  const wrong = arityError({ name: `commandlog|${sub}`, arity }, args.length);
  if (wrong !== null) return encodeError(wrong);
  if (sub === 'help') return help('COMMANDLOG', COMMANDLOG_HELP);
  const logs = session.ctx.observer!.logs;
  const typeOf = (b: Buffer): CommandLogType | null => {
    const t = b.toString('latin1').toLowerCase();
    return t === 'slow' || t === 'large-request' || t === 'large-reply' ? t : null;
  };
  if (sub === 'get') {
    const count = parseCount(args[2]!);
    if (count === null) return encodeError(ProxyError.countAtLeastMinusOne());
    const type = typeOf(args[3]!);
    if (type === null) return encodeError(ProxyError.commandlogType());
    return getReply(logs[type], count, protocol);
  }
  const type = typeOf(args[2]!);
  if (type === null) return encodeError(ProxyError.commandlogType());
  if (sub === 'len') return encodeInteger(logs[type].length);
  logs[type].reset();
  return OK;
}

/** One command's `calls` and `histogram_usec` map (latency.c fillCommandCDF). */
function commandCdf(h: LatencyHistogram, protocol: 2 | 3): Buffer {
  const cdf = h.valkeyCdf().map(([us, count]): [Buffer, Buffer] => [encodeInteger(us), encodeInteger(count)]);
  return encodeMap([
    [encodeBulk('calls', protocol), encodeInteger(h.count)],
    [encodeBulk('histogram_usec', protocol), encodeMap(cdf, protocol)],
  ], protocol);
}

/**
 * LATENCY HISTOGRAM [command …]: every command with data, or the ones named (a container names
 * its subcommands too); unknown names are skipped, as in Valkey.
 */
function latencyHistogram(session: HandlerSession, args: readonly Buffer[], protocol: 2 | 3): Buffer {
  const latency = session.ctx.observer!.commands;
  const out: Array<[Buffer, Buffer]> = [];
  const add = (name: string, h: LatencyHistogram | undefined) => {
    if (h !== undefined) out.push([encodeBulk(name, protocol), commandCdf(h, protocol)]);
  };
  if (args.length === 2) {
    for (const [name, h] of latency.entries()) add(name, h);
  } else {
    const table = session.ctx.commands();
    for (let j = 2; j < args.length; j++) {
      const name = args[j]!.toString('latin1').toLowerCase();
      const spec = table.get(name);
      if (spec === undefined) continue;
      add(spec.name, latency.get(spec.name));
      for (const sub of spec.subcommands?.values() ?? []) add(sub.name, latency.get(sub.name));
    }
  }
  return encodeMap(out, protocol);
}
