import { commandMayHaveKeys, type CommandSpec, type CommandTable } from '../commands/command-table.js';
import { encodeCommand, encodeError } from '../resp/encode.js';
import { ProxyError } from '../errors.js';
import { RequestFrame } from '../resp/request-framer.js';
import type { KeyColocation } from './colocation.js';
import { escapeGlob } from './glob-overlap.js';

const MATCH = Buffer.from('MATCH');
const STAR = Buffer.from('*');

/**
 * A request with its key names as the nodes store them (colocation.ts): every key argument its
 * command's key specs name (scripts' and functions' KEYS, WATCH's, MIGRATE's included), and the
 * patterns that stand for keys — KEYS's and SCAN's MATCH, SORT's BY and GET. The same frame
 * when nothing changes; an error reply for a name that has no stored form of its own.
 *
 * A pattern is sent prefixed when one rule covers every key ("*"): the node then filters as it
 * would. With other rules a pattern may match keys stored both ways, so KEYS is sent `*` and SCAN
 * without MATCH, and reply-names.ts applies the client's pattern to the client's names.
 */
export function requestWithStoredNames(names: KeyColocation, table: CommandTable, spec: CommandSpec, frame: RequestFrame): RequestFrame | Buffer {
  const command = spec.name;
  let args: Buffer[] | null = null;
  const set = (i: number, value: Buffer) => {
    if (args === null) args = [...frame.args];
    args[i] = value;
  };
  if (command === 'keys' && frame.args.length === 2) {
    set(1, nodePattern(names, frame.args[1]!));
  } else if (command === 'scan') {
    const at = matchIndex(frame.args);
    if (names.everyKeyPrefix !== null) {
      if (at > 0) set(at, nodePattern(names, frame.args[at]!));
      else args = [...frame.args, MATCH, nodePattern(names, STAR)];
    } else if (at > 0) {
      args = [...frame.args.slice(0, at - 1), ...frame.args.slice(at + 1)];
    }
  } else if ((command === 'sort' || command === 'sort_ro') && names.everyKeyPrefix !== null) {
    const a = frame.args;
    for (let i = 2; i + 1 < a.length; i++) {
      const word = a[i]!.toString('latin1').toLowerCase();
      if (word !== 'by' && word !== 'get') continue;
      const pattern = a[i + 1]!;
      if (!(word === 'get' && pattern.length === 1 && pattern[0] === 0x23) /* GET # is the element */) set(i + 1, Buffer.concat([names.everyKeyPrefix, pattern]));
      i++;
    }
  }
  if (commandMayHaveKeys(spec)) {
    for (const i of table.keyIndexes(spec, frame.args)) {
      const key = (args ?? frame.args)[i]!;
      const stored = names.storedName(key);
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

/** SCAN's MATCH argument (its pattern's index), or -1. */
export function matchIndex(args: readonly Buffer[]): number {
  for (let i = 2; i + 1 < args.length; i += 2) {
    const a = args[i]!;
    if (a.length === 5 && a.toString('latin1').toLowerCase() === 'match') return i + 1;
  }
  return -1;
}

function nodePattern(names: KeyColocation, pattern: Buffer): Buffer {
  return names.everyKeyPrefix !== null ? Buffer.concat([escapeGlob(names.everyKeyPrefix), pattern]) : STAR;
}
