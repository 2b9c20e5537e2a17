import { commandMayHaveKeys, type CommandSpec, type CommandTable } from '../commands/command-table.js';
import { encodeCommand, encodeError } from '../resp/encode.js';
import { ProxyError } from '../errors.js';
import { RequestFrame } from '../resp/request-framer.js';
import type { KeyNames } from './key-names.js';
import { namesChannels } from './channel-names.js';

const MATCH = Buffer.from('MATCH');
/**
 * A key longer than the nodes take (proto-max-bulk-len: limits.maxBulkLength) once stored: what
 * Valkey answers a bulk string over its limit, before it closes the connection — the caller
 * closes the client's, so no shared link carries a request the node would close it for.
 */
export const STORED_KEY_TOO_LONG = encodeError('ERR Protocol error: invalid bulk length');
const LIBRARYNAME = Buffer.from('LIBRARYNAME');

const STAR = Buffer.from('*');

/**
 * A request with its key names as the nodes store them (key-names.ts: the user's namespace, the
 * colocation rules): every key argument its command's key specs name (scripts' and functions'
 * KEYS, WATCH's, MIGRATE's included), and the patterns that stand for keys — KEYS's and SCAN's
 * MATCH, SORT's BY and GET. The same frame when nothing changes; an error reply for a name that
 * has no stored form of its own, or STORED_KEY_TOO_LONG.
 *
 * A pattern is sent behind the stored names' common prefix when there is one (a namespace, a rule
 * for every key: `nodePatternPrefix`), and the node filters as it would. Under other rules a
 * pattern may match keys stored both ways, so KEYS and SCAN ask for every key in reach
 * (`scopePattern`), and reply-names.ts applies the client's pattern to the client's names.
 */
export function requestWithStoredNames(names: KeyNames, table: CommandTable, spec: CommandSpec, frame: RequestFrame, maxKeyLength: number): RequestFrame | Buffer {
  const command = spec.name;
  let args: Buffer[] | null = null;
  const set = (i: number, value: Buffer) => {
    if (args === null) args = [...frame.args];
    args[i] = value;
  };
  const prefix = names.nodePatternPrefix;
  if (command === 'keys' && frame.args.length === 2) {
    set(1, prefix !== null ? Buffer.concat([prefix, frame.args[1]!]) : names.scopePattern);
  } else if (command === 'scan') {
    const at = matchIndex(frame.args);
    const pattern = prefix !== null ? Buffer.concat([prefix, at > 0 ? frame.args[at]! : STAR]) : names.scopePattern;
    if (at > 0) set(at, pattern);
    else if (pattern.length > 1 || pattern[0] !== 0x2a /* not just "*" */) args = [...frame.args, MATCH, pattern];
  } else if ((command === 'sort' || command === 'sort_ro') && names.sortPrefix !== null && names.sortPrefix.length > 0) {
    const a = frame.args;
    for (let i = 2; i + 1 < a.length; i++) {
      const word = a[i]!.toString('latin1').toLowerCase();
      if (word !== 'by' && word !== 'get') continue;
      const pattern = a[i + 1]!;
      if (!(word === 'get' && pattern.length === 1 && pattern[0] === 0x23) /* GET # is the element */) set(i + 1, Buffer.concat([names.sortPrefix, pattern]));
      i++;
    }
  }
  const functions = names.functions;
  if (functions !== null && (command === 'fcall' || command === 'fcall_ro' || command.startsWith('function|'))) {
    const a = frame.args;
    if ((command === 'fcall' || command === 'fcall_ro' || command === 'function|delete') && a.length > (command === 'function|delete' ? 2 : 1)) {
      const at = command === 'function|delete' ? 2 : 1;
      set(at, functions.storedName(a[at]!));
    } else if (command === 'function|load' && a.length > 2) {
      set(a.length - 1, functions.storedCode(a[a.length - 1]!));
    } else if (command === 'function|list' && !endsWithLibraryName(a)) {
      // (a LIBRARYNAME without its pattern goes as it is: the node answers that error)
      const at = libraryNameIndex(a);
      const pattern = Buffer.concat([functions.marker, at > 0 ? a[at]! : STAR]);
      if (at > 0) set(at, pattern);
      else args = [...a, LIBRARYNAME, pattern];
    }
  }
  if (commandMayHaveKeys(spec) && !namesChannels(command)) {
    for (const i of table.keyIndexes(spec, frame.args)) {
      const key = (args ?? frame.args)[i]!;
      const stored = names.storedName(key);
      if (stored !== null && stored.length > maxKeyLength) return STORED_KEY_TOO_LONG;
      if (stored !== null) set(i, stored);
      else if (names.collides(key)) return encodeError(ProxyError.colocatedNameTaken(key.toString('utf8').slice(0, 64)));
    }
  }
  if (args === null) return frame;
  const out = RequestFrame.of(args, encodeCommand(args));
  out.spec = frame.spec;
  out.command = frame.command;
  return out;
}

/** SORT's BY/GET patterns; SPUBLISH's and SSUBSCRIBE's "keys", which are channels. */
export function namesPatternsOrChannels(command: string): boolean {
  return command === 'sort' || command === 'sort_ro' || namesChannels(command);
}

/** FUNCTION LIST's LIBRARYNAME pattern (its index), or -1. */
function libraryNameIndex(args: readonly Buffer[]): number {
  for (let i = 2; i + 1 < args.length; i++) {
    const a = args[i]!;
    if (a.length === 11 && a.toString('latin1').toLowerCase() === 'libraryname') return i + 1;
  }
  return -1;
}

function endsWithLibraryName(args: readonly Buffer[]): boolean {
  return args.length > 2 && args[args.length - 1]!.toString('latin1').toLowerCase() === 'libraryname';
}

/** SCAN's MATCH argument (its pattern's index), or -1. */
export function matchIndex(args: readonly Buffer[]): number {
  for (let i = 2; i + 1 < args.length; i += 2) {
    const a = args[i]!;
    if (a.length === 5 && a.toString('latin1').toLowerCase() === 'match') return i + 1;
  }
  return -1;
}
