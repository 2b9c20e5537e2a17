import { bulkPayload, splitAggregate } from '../resp/decode.js';
import { encodeArray, encodeBulk } from '../resp/encode.js';
import { globMatch } from '../util/glob.js';
import type { KeyNames } from './key-names.js';
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
  switch (command) {
    case 'blpop':
    case 'brpop':
    case 'bzpopmin':
    case 'bzpopmax':
    case 'lmpop':
    case 'blmpop':
    case 'zmpop':
    case 'bzmpop':
      return (reply) => filterChildren(reply, (child, i) => (i === 0 ? clientBulk(names, child) : child));
    case 'xread':
    case 'xreadgroup':
      // RESP2: [[name, entries], …]; RESP3: a map name → entries.
      return (reply) =>
        reply[0] === 0x25 /* % */
          ? filterChildren(reply, (child, i) => (i % 2 === 0 ? clientBulk(names, child) : child))
          : filterChildren(reply, (pair) => filterChildren(pair, (child, i) => (i === 0 ? clientBulk(names, child) : child)));
    case 'randomkey':
      return (reply) => clientBulk(names, reply);
    case 'keys':
      return (reply) => visibleKeys(names, reply, names.nodePatternPrefix === null ? (args[1] ?? null) : null);
    case 'scan': {
      const at = matchIndex(args);
      const pattern = at > 0 && names.nodePatternPrefix === null ? args[at]! : null;
      return (reply) => filterChildren(reply, (child, i) => (i === 1 ? visibleKeys(names, child, pattern) : child));
    }
    case 'pubsub|channels':
    case 'pubsub|shardchannels':
      return names.namespace === null ? null : (reply) => clientChannelList(names, reply);
    case 'pubsub|numsub':
    case 'pubsub|shardnumsub': {
      if (names.namespace === null) return null;
      const asked = args.slice(2).map((a) => Buffer.from(a)); // the request's bytes are not kept past its handling
      return (reply) => clientNumsub(asked, reply);
    }
    case 'eval':
    case 'eval_ro':
    case 'evalsha':
    case 'evalsha_ro':
    case 'fcall':
    case 'fcall_ro':
      return scriptReplyNames(names, args);
    default:
      return null;
  }
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
