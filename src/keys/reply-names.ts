import { bulkPayload, splitAggregate } from '../resp/decode.js';
import { encodeArray, encodeBulk } from '../resp/encode.js';
import { globMatch } from '../util/glob.js';
import type { KeyNames } from './key-names.js';
import type { FunctionNames } from './function-names.js';
import { matchIndex } from './request-names.js';
import { clientChannelList, clientNumsub } from './channel-names.js';

/** Turns a reply from the nodes' names into the client's. */
export type ReplyNames = (reply: Buffer) => Buffer;

/**
 * The replies that carry key names back, and how each is turned into the client's names
 * (key-names.ts): a popped key (BLPOP, BZPOPMIN, LMPOP, BLMPOP, ZMPOP …), the streams of
 * XREAD/XREADGROUP, RANDOMKEY's key, a script's declared keys it returns, and the key lists of KEYS and SCAN — there also filtered by
 * the client's pattern when the nodes could not be (request-names.ts) and cleared of keys no
 * client name reaches. Null: the command's reply names no key. Errors and nulls pass unchanged.
 */
export function replyNamesFor(names: KeyNames, command: string, args: readonly Buffer[]): ReplyNames | null {
  return REPLY_NAMERS.get(command)?.(names, args) ?? null;
}

/** Whether `command`'s reply may name keys or channels (replyNamesFor can turn it). */
export function namesKeysInReply(command: string): boolean {
  return REPLY_NAMERS.has(command);
}

type ReplyNamer = (names: KeyNames, args: readonly Buffer[]) => ReplyNames | null;

const poppedKey: ReplyNamer = (names) => (reply) => filterChildren(reply, (child, i) => (i === 0 ? clientBulk(names, child) : child));
// RESP2: [[name, entries], …]; RESP3: a map name → entries.
const streamNames: ReplyNamer = (names) => (reply) =>
  reply[0] === 0x25 /* % */
    ? filterChildren(reply, (child, i) => (i % 2 === 0 ? clientBulk(names, child) : child))
    : filterChildren(reply, (pair) => filterChildren(pair, (child, i) => (i === 0 ? clientBulk(names, child) : child)));
const channelList: ReplyNamer = (names) => (names.namespace === null ? null : (reply) => clientChannelList(names, reply));
const numsub: ReplyNamer = (names, args) => {
  if (names.namespace === null) return null;
  const asked = args.slice(2).map((a) => Buffer.from(a)); // the request's bytes are not kept past its handling
  return (reply) => clientNumsub(asked, reply);
};

const REPLY_NAMERS: ReadonlyMap<string, ReplyNamer> = new Map<string, ReplyNamer>([
  ...['blpop', 'brpop', 'bzpopmin', 'bzpopmax', 'lmpop', 'blmpop', 'zmpop', 'bzmpop'].map((c): [string, ReplyNamer] => [c, poppedKey]),
  ['xread', streamNames],
  ['xreadgroup', streamNames],
  ['randomkey', (names) => (reply) => clientBulk(names, reply)],
  ['keys', (names, args) => (reply) => visibleKeys(names, reply, names.nodePatternPrefix === null ? (args[1] ?? null) : null)],
  [
    'scan',
    (names, args) => {
      const at = matchIndex(args);
      const pattern = at > 0 && names.nodePatternPrefix === null ? args[at]! : null;
      return (reply) => filterChildren(reply, (child, i) => (i === 1 ? visibleKeys(names, child, pattern) : child));
    },
  ],
  ['pubsub|channels', channelList],
  ['pubsub|shardchannels', channelList],
  ['pubsub|numsub', numsub],
  ['pubsub|shardnumsub', numsub],
  ...['eval', 'eval_ro', 'evalsha', 'evalsha_ro'].map((c): [string, ReplyNamer] => [c, scriptReplyNames]),
  ['fcall', functionCallNames],
  ['fcall_ro', functionCallNames],
  ['function|load', (names) => (names.functions === null ? null : libraryLoaded(names.functions))],
  ['function|list', (names) => (names.functions === null ? null : libraryList(names.functions))],
  ['function|delete', (names) => (names.functions === null ? null : (reply) => names.functions!.clientError(reply))],
]);

/** FCALL's reply: its declared keys as the client's (scriptReplyNames), its errors without the namespace's function marker. */
function functionCallNames(names: KeyNames, args: readonly Buffer[]): ReplyNames | null {
  const keys = scriptReplyNames(names, args);
  const functions = names.functions;
  if (functions === null) return keys;
  return (reply) => (reply[0] === 0x2d || reply[0] === 0x21 ? functions.clientError(reply) : keys === null ? reply : keys(reply));
}

/** FUNCTION LOAD's reply: the library's name as the client gave it. */
function libraryLoaded(functions: FunctionNames): ReplyNames {
  return (reply) => {
    const stored = bulkPayload(reply);
    const name = stored === null ? null : functions.clientName(stored);
    return name !== null ? encodeBulk(name, 2) : functions.clientError(reply);
  };
}

function libraryList(functions: FunctionNames): ReplyNames {
  return (reply) => (reply[0] === 0x2d ? functions.clientError(reply) : functions.clientLibraries(reply));
}

/**
 * A script's or function's reply, where a bulk string that is exactly the stored name of one of
 * its declared keys (a script returning KEYS[1]) is given as the name the client passed, as one
 * server would return it. Any other string is a value and stays; a value equal to a declared
 * key's stored name ({all}k, s:k) is the one thing turned that was not a name.
 */
function scriptReplyNames(names: KeyNames, args: readonly Buffer[]): ReplyNames | null {
  const numkeys = Number(args[2]?.toString('latin1'));
  if (!Number.isInteger(numkeys) || numkeys <= 0 || args.length < 3 + numkeys) return null;
  const back = new Map<string, Buffer>();
  for (const key of args.slice(3, 3 + numkeys)) {
    const stored = names.storedName(key);
    if (stored !== null) back.set(stored.toString('latin1'), Buffer.from(key)); // the request's bytes are not kept
  }
  if (back.size === 0) return null;
  const walk = (frame: Buffer): Buffer => {
    if (frame[0] !== 0x24 /* $ */) return filterChildren(frame, walk);
    const payload = bulkPayload(frame);
    const name = payload === null ? undefined : back.get(payload.toString('latin1'));
    return name === undefined ? frame : encodeBulk(name, 2);
  };
  return walk;
}

/**
 * EXEC's array with each element's key names as the client's: `perCommand[i]` turns the i-th
 * queued command's reply (null: it names no key). An error, a nil, or an array of another length
 * (nothing ran, or not the commands counted) passes unchanged.
 */
export function execReplyNames(perCommand: ReadonlyArray<ReplyNames | null | undefined>, reply: Buffer): Buffer {
  if (!perCommand.some((n) => n != null)) return reply;
  const parts = reply[0] === 0x2a /* * */ ? splitAggregate(reply) : null;
  if (parts === null || parts.length !== perCommand.length) return reply;
  return encodeArray(parts.map((part, i) => perCommand[i]?.(part) ?? part));
}

/** A bulk string with the client's name for the stored name it holds. */
function clientBulk(names: KeyNames, frame: Buffer): Buffer {
  const stored = bulkPayload(frame);
  if (stored === null) return frame;
  const name = names.clientName(stored);
  return name === null ? frame : encodeBulk(name, 2);
}

/** A list of stored names as the client's: hidden ones left out, then the client's pattern applied. */
function visibleKeys(names: KeyNames, frame: Buffer, pattern: Buffer | null): Buffer {
  return filterChildren(frame, (child) => {
    const stored = bulkPayload(child);
    if (stored === null) return child;
    const name = names.visibleName(stored);
    if (name === null || (pattern !== null && !globMatch(pattern, name))) return null;
    return name === stored ? child : encodeBulk(name, 2);
  });
}

/** An aggregate with each child changed (or dropped: null); anything else unchanged. */
function filterChildren(frame: Buffer, change: (child: Buffer, index: number) => Buffer | null): Buffer {
  const type = frame[0];
  if (type !== 0x2a /* * */ && type !== 0x25 /* % */ && type !== 0x7e /* ~ */) return frame;
  const children = splitAggregate(frame);
  if (children === null) return frame;
  const out: Buffer[] = [];
  let same = true;
  for (let i = 0; i < children.length; i++) {
    const next = change(children[i]!, i);
    if (next !== children[i]) same = false;
    if (next !== null) out.push(next);
  }
  if (same) return frame;
  const count = type === 0x25 ? out.length / 2 : out.length;
  return Buffer.concat([Buffer.from(`${String.fromCharCode(type)}${count}\r\n`, 'latin1'), ...out]);
}
