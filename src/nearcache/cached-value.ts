/**
 * What the near cache holds of a key, read off a fill's reply, and the reply each cached read
 * gets from it in the client's protocol — byte for byte what the node answers:
 *
 *   none   : the key does not exist (GET's nil, an empty aggregate): every read's "nothing"
 *   string : GET's bulk reply, kept as it came
 *   hash   : HGETALL's field/value bulk frames in the node's order, and where each value starts
 *   set    : SMEMBERS' member frames in the node's order, and the members
 *   list   : LRANGE 0 -1's element frames, and where each starts
 *   zset   : ZRANGE 0 -1 WITHSCORES' [member, score] frames in rank order, where each part is
 *
 *   read          none      string        hash                set                list
 *   GET           nil       the value     WRONGTYPE …
 *   GETRANGE      ""        the range
 *   STRLEN        0         its length
 *   EXISTS        0         1             1                   1                  1
 *   MGET's part   nil       the value     nil                 nil                nil
 *   HGET HMGET    nil(s)    WRONGTYPE     the field(s)' value(s) or nil
 *   HGETALL       empty                   every pair (RESP3 map, RESP2 flat array)
 *   HLEN HEXISTS  0                       the count; 1 or 0
 *   HSTRLEN       0                       the value's length or 0
 *   SMEMBERS      empty                                       every member (RESP3 set)
 *   SISMEMBER     0                                           1 or 0
 *   SMISMEMBER    0s                                          1 or 0 each
 *   SCARD         0                                           the count
 *   LRANGE        empty                                                          the range
 *   LINDEX        nil                                                            the element or nil
 *   LLEN          0                                                              the count
 *
 *   sorted set (ZRANGE 0 -1 WITHSCORES' pairs): ZCARD the count, ZSCORE / ZMSCORE the score(s) as
 *   the node wrote them (RESP3 double, RESP2 bulk of the same text) or nil, ZRANGE start stop
 *   [WITHSCORES] by rank; missing key: 0, nil(s), empty
 *
 * A read of another type than the key's is WRONGTYPE (the blank cells), except EXISTS and MGET.
 */

import { encodeArray, encodeInteger } from '../resp/encode.js';

export type CachedRead =
  | 'get' | 'getrange' | 'strlen' | 'exists' | 'mgetpart'
  | 'hget' | 'hmget' | 'hgetall' | 'hlen' | 'hexists' | 'hstrlen'
  | 'smembers' | 'sismember' | 'smismember' | 'scard'
  | 'lrange' | 'lindex' | 'llen'
  | 'zcard' | 'zscore' | 'zmscore' | 'zrange';

type ValueType = 'string' | 'hash' | 'set' | 'list' | 'zset';

/** The type a read expects (null: any, EXISTS and MGET's parts). */
function typeOfRead(kind: CachedRead): ValueType | null {
  if (kind === 'exists' || kind === 'mgetpart') return null;
  if (kind === 'get' || kind === 'getrange' || kind === 'strlen') return 'string';
  return kind[0] === 'h' ? 'hash' : kind[0] === 's' ? 'set' : kind[0] === 'z' ? 'zset' : 'list';
}

const FILLS: Readonly<Record<ValueType, readonly string[]>> = {
  string: ['GET'],
  hash: ['HGETALL'],
  set: ['SMEMBERS'],
  list: ['LRANGE', '0', '-1'],
  zset: ['ZRANGE', '0', '-1', 'WITHSCORES'],
};

/** The node command whose reply fills an entry for this read (the key goes after its name). */
export function fillCommand(kind: CachedRead): readonly string[] {
  return FILLS[typeOfRead(kind) ?? 'string'];
}

/** Whether an error answering `fill` is this read's own answer (WRONGTYPE for a read of the fill's type). */
export function sharesFill(kind: CachedRead, fill: readonly string[]): boolean {
  const type = typeOfRead(kind);
  return type !== null && FILLS[type] === fill;
}

/** An aggregate's element frames as the node sent them, how many, and where each starts (hash: each pair). */
interface Elements {
  readonly frames: Buffer;
  readonly count: number;
  readonly offsets: Int32Array;
}

export type CachedValue =
  | { readonly type: 'none' }
  | { readonly type: 'string'; readonly frame: Buffer }
  | ({ readonly type: 'hash'; readonly index: ReadonlyMap<string, number> } & Elements)
  | ({ readonly type: 'set'; readonly index: ReadonlySet<string> } & Elements)
  | ({ readonly type: 'list' } & Elements)
  | ({ readonly type: 'zset'; readonly index: ReadonlyMap<string, number>; readonly parts: Int32Array } & Elements);

export const NONE: CachedValue = { type: 'none' };

/** Bytes an index entry costs beyond its name (a Map or Set slot). */
const INDEX_OVERHEAD = 48;

export function valueBytes(value: CachedValue): number {
  switch (value.type) {
    case 'none':
      return 0;
    case 'string':
      return value.frame.length;
    case 'list':
      return value.frames.length + value.offsets.byteLength;
    case 'zset': {
      let n = value.frames.length + value.offsets.byteLength + value.parts.byteLength;
      for (const name of value.index.keys()) n += name.length + INDEX_OVERHEAD;
      return n;
    }
    default: {
      let n = value.frames.length + value.offsets.byteLength;
      for (const name of value.index.keys()) n += name.length + INDEX_OVERHEAD;
      return n;
    }
  }
}

/** The value a fill's reply holds, or null when it holds none (an error, an unexpected shape). */
export function valueOf(fill: readonly string[], reply: Buffer): CachedValue | null {
  if (fill === FILLS.string) {
    if (reply[0] === 0x5f /* _ */) return NONE;
    return reply[0] === 0x24 /* $ */ ? { type: 'string', frame: reply } : null;
  }
  if (fill === FILLS.zset) return sortedSetOf(reply);
  const header = fill === FILLS.hash ? 0x25 /* % */ : fill === FILLS.set ? 0x7e /* ~ */ : 0x2a; /* * */
  if (reply[0] !== header) return null;
  const eol = reply.indexOf(0x0d);
  const count = Number(reply.toString('latin1', 1, eol));
  if (count === 0) return NONE; // Valkey keeps no empty aggregate: the key does not exist
  const per = fill === FILLS.hash ? 2 : 1;
  const start = eol + 2;
  const offsets = new Int32Array(count);
  let at = start;
  for (let i = 0; i < count; i++) {
    offsets[i] = at - start;
    for (let j = 0; j < per; j++) {
      const bulk = bulkAt(reply, at);
      if (bulk === null) return null;
      at = bulk.end;
    }
  }
  const frames = reply.subarray(start, at);
  const name = (i: number) => {
    const b = bulkAt(frames, offsets[i]!)!;
    return frames.toString('latin1', b.start, b.start + b.length);
  };
  if (fill === FILLS.list) return { type: 'list', frames, count, offsets };
  if (fill === FILLS.set) {
    const index = new Set<string>();
    for (let i = 0; i < count; i++) index.add(name(i));
    return { type: 'set', frames, count, offsets, index };
  }
  const index = new Map<string, number>();
  for (let i = 0; i < count; i++) index.set(name(i), bulkAt(frames, offsets[i]!)!.end); // where the field's value starts
  return { type: 'hash', frames, count, offsets, index };
}

/**
 * ZRANGE 0 -1 WITHSCORES in RESP3: `*n` of `*2` [member bulk, score double]. `parts[4i..4i+3]`:
 * member frame start and end, score text start and end (past "," and before CRLF), in `frames`.
 */
function sortedSetOf(reply: Buffer): CachedValue | null {
  if (reply[0] !== 0x2a) return null;
  const eol = reply.indexOf(0x0d);
  const count = Number(reply.toString('latin1', 1, eol));
  if (count === 0) return NONE;
  const start = eol + 2;
  const offsets = new Int32Array(count);
  const parts = new Int32Array(count * 4);
  const index = new Map<string, number>();
  let at = start;
  for (let i = 0; i < count; i++) {
    offsets[i] = at - start;
    if (reply.toString('latin1', at, at + 4) !== '*2\r\n') return null;
    const member = bulkAt(reply, at + 4);
    if (member === null || reply[member.end] !== 0x2c /* , */) return null;
    const scoreEnd = reply.indexOf(0x0d, member.end);
    if (scoreEnd < 0) return null;
    parts.set([at + 4 - start, member.end - start, member.end + 1 - start, scoreEnd - start], i * 4);
    index.set(reply.toString('latin1', member.start, member.start + member.length), i);
    at = scoreEnd + 2;
  }
  return { type: 'zset', frames: reply.subarray(start, at), count, offsets, parts, index };
}

const NULL2 = Buffer.from('$-1\r\n');
const NULL3 = Buffer.from('_\r\n');
const ONE = Buffer.from(':1\r\n');
const ZERO = Buffer.from(':0\r\n');
const EMPTY_ARRAY = Buffer.from('*0\r\n');
const EMPTY_MAP = Buffer.from('%0\r\n');
const EMPTY_SET = Buffer.from('~0\r\n');
const CRLF = Buffer.from('\r\n');
const EMPTY_BULK = Buffer.from('$0\r\n\r\n');
const WRONGTYPE = Buffer.from('-WRONGTYPE Operation against a key holding the wrong kind of value\r\n');

/** Valkey's nil in `protocol`. */
export function nil(protocol: 2 | 3): Buffer {
  return protocol === 3 ? NULL3 : NULL2;
}

/** A WRONGTYPE error reply (the node's, or ours). */
export function isWrongType(reply: Buffer): boolean {
  return reply[0] === 0x2d && reply.toString('latin1', 0, 10) === '-WRONGTYPE';
}

/** The reply `kind` (with its arguments past the key: fields, members, indexes) gets from `value`, in `protocol`. */
export function replyFor(value: CachedValue, kind: CachedRead, args: readonly Buffer[], protocol: 2 | 3): Buffer {
  const nilReply = nil(protocol);
  if (kind === 'exists') return value.type === 'none' ? ZERO : ONE;
  if (kind === 'mgetpart') return value.type === 'string' ? value.frame : nilReply;
  if (value.type === 'none') return nothing(kind, args, protocol);
  if (value.type !== typeOfRead(kind)) return WRONGTYPE;
  switch (value.type) {
    case 'string': {
      if (kind === 'get') return value.frame;
      const bulk = bulkAt(value.frame, 0)!;
      if (kind === 'strlen') return encodeInteger(bulk.length);
      return getRange(value.frame.subarray(bulk.start, bulk.start + bulk.length), Number(args[0]), Number(args[1]));
    }
    case 'hash':
      switch (kind) {
        case 'hget':
          return hashValue(value, args[0]!) ?? nilReply;
        case 'hmget':
          return encodeArray(args.map((f) => hashValue(value, f) ?? nilReply));
        case 'hgetall':
          return Buffer.concat([Buffer.from(protocol === 3 ? `%${value.count}\r\n` : `*${value.count * 2}\r\n`), value.frames]);
        case 'hlen':
          return encodeInteger(value.count);
        case 'hexists':
          return value.index.has(args[0]!.toString('latin1')) ? ONE : ZERO;
        default: {
          const frame = hashValue(value, args[0]!); // HSTRLEN
          return frame === null ? ZERO : encodeInteger(bulkAt(frame, 0)!.length);
        }
      }
    case 'set':
      switch (kind) {
        case 'smembers':
          return Buffer.concat([Buffer.from(`${protocol === 3 ? '~' : '*'}${value.count}\r\n`), value.frames]);
        case 'sismember':
          return value.index.has(args[0]!.toString('latin1')) ? ONE : ZERO;
        case 'smismember':
          return encodeArray(args.map((m) => (value.index.has(m.toString('latin1')) ? ONE : ZERO)));
        default:
          return encodeInteger(value.count); // SCARD
      }
    case 'zset':
      switch (kind) {
        case 'zcard':
          return encodeInteger(value.count);
        case 'zscore': {
          const i = value.index.get(args[0]!.toString('latin1'));
          return i === undefined ? nilReply : score(value, i, protocol);
        }
        case 'zmscore':
          return encodeArray(args.map((m) => {
            const i = value.index.get(m.toString('latin1'));
            return i === undefined ? nilReply : score(value, i, protocol);
          }));
        default:
          return zrange(value, Number(args[0]), Number(args[1]), args.length === 3, protocol); // ZRANGE start stop [WITHSCORES]
      }
    case 'list':
      switch (kind) {
        case 'llen':
          return encodeInteger(value.count);
        case 'lindex': {
          let i = Number(args[0]);
          if (i < 0) i += value.count;
          return i < 0 || i >= value.count ? nilReply : element(value, i, i + 1);
        }
        default:
          return listRange(value, Number(args[0]), Number(args[1])); // LRANGE
      }
  }
}

/** What each read answers for a key that does not exist. */
function nothing(kind: CachedRead, args: readonly Buffer[], protocol: 2 | 3): Buffer {
  const nilReply = nil(protocol);
  switch (kind) {
    case 'get': case 'hget': case 'lindex': case 'zscore':
      return nilReply;
    case 'zmscore':
      return encodeArray(args.map(() => nilReply));
    case 'zrange':
      return EMPTY_ARRAY;
    case 'getrange':
      return EMPTY_BULK;
    case 'hmget':
      return encodeArray(args.map(() => nilReply));
    case 'smismember':
      return encodeArray(args.map(() => ZERO));
    case 'hgetall':
      return protocol === 3 ? EMPTY_MAP : EMPTY_ARRAY;
    case 'smembers':
      return protocol === 3 ? EMPTY_SET : EMPTY_ARRAY;
    case 'lrange':
      return EMPTY_ARRAY;
    default:
      return ZERO; // STRLEN, HLEN, HEXISTS, HSTRLEN, SISMEMBER, SCARD, LLEN, ZCARD
  }
}

function hashValue(value: Extract<CachedValue, { type: 'hash' }>, field: Buffer): Buffer | null {
  const at = value.index.get(field.toString('latin1'));
  return at === undefined ? null : value.frames.subarray(at, bulkAt(value.frames, at)!.end);
}

/** Elements [from, to) of a list or a sorted set (a sorted set's: [member, score] pairs), their frames as the node sent them. */
function element(value: Elements, from: number, to: number): Buffer {
  const end = to < value.count ? value.offsets[to]! : value.frames.length;
  return value.frames.subarray(value.offsets[from]!, end);
}

/**
 * A rank range over `n` elements as Valkey's lrangeCommand and zrangeGenericCommand read it:
 * negative indexes from the end, start clamped to 0, end to the last; null when it is empty
 * (start > end, or start past the end).
 */
function rankRange(n: number, start: number, end: number): { start: number; end: number } | null {
  if (start < 0) start = n + start;
  if (end < 0) end = n + end;
  if (start < 0) start = 0;
  if (start > end || start >= n) return null;
  return { start, end: Math.min(end, n - 1) };
}

/** LRANGE's reply. */
function listRange(value: Extract<CachedValue, { type: 'list' }>, start: number, end: number): Buffer {
  const range = rankRange(value.count, start, end);
  if (range === null) return EMPTY_ARRAY;
  return Buffer.concat([arrayHeader(range.end - range.start + 1), element(value, range.start, range.end + 1)]);
}

/** The score of member `i` as the node wrote it: a RESP3 double, or a RESP2 bulk of the same text (Valkey's addReplyDouble). */
function score(value: Extract<CachedValue, { type: 'zset' }>, i: number, protocol: 2 | 3): Buffer {
  const from = value.parts[i * 4 + 2]!;
  const to = value.parts[i * 4 + 3]!;
  if (protocol === 3) return value.frames.subarray(from - 1, to + 2);
  return Buffer.concat([Buffer.from(`$${to - from}\r\n`), value.frames.subarray(from, to), CRLF]);
}

/** ZRANGE by rank (rankRange); WITHSCORES: RESP3 [member, score] pairs, RESP2 flat. */
function zrange(value: Extract<CachedValue, { type: 'zset' }>, start: number, end: number, withScores: boolean, protocol: 2 | 3): Buffer {
  const range = rankRange(value.count, start, end);
  if (range === null) return EMPTY_ARRAY;
  const count = range.end - range.start + 1;
  if (withScores && protocol === 3) return Buffer.concat([arrayHeader(count), element(value, range.start, range.end + 1)]);
  const out: Buffer[] = [arrayHeader(withScores ? count * 2 : count)];
  for (let i = range.start; i <= range.end; i++) {
    out.push(value.frames.subarray(value.parts[i * 4]!, value.parts[i * 4 + 1]!));
    if (withScores) out.push(score(value, i, 2));
  }
  return Buffer.concat(out);
}

/** GETRANGE's reply (Valkey's getrangeCommand: negative indexes from the end, clamped; nothing when start > end). */
function getRange(str: Buffer, start: number, end: number): Buffer {
  const n = str.length;
  if (start < 0 && end < 0 && start > end) return EMPTY_BULK;
  if (start < 0) start = n + start;
  if (end < 0) end = n + end;
  if (start < 0) start = 0;
  if (end < 0) end = 0;
  if (end >= n) end = n - 1;
  if (start > end || n === 0) return EMPTY_BULK;
  const part = str.subarray(start, end + 1);
  return Buffer.concat([Buffer.from(`$${part.length}\r\n`), part, CRLF]);
}

/** An index argument as Valkey reads it (string2ll), within JavaScript's exact range; else null (the node answers, and words the error). */
export function rangeIndex(arg: Buffer): number | null {
  const text = arg.toString('latin1');
  if (!/^(0|-?[1-9][0-9]{0,14})$/.test(text)) return null;
  return Number(text);
}

function arrayHeader(n: number): Buffer {
  return Buffer.from(`*${n}\r\n`);
}

/** The bulk frame ("$n\r\n…\r\n") at `at`: its content's start and length, and where the frame ends; null if none is there. */
function bulkAt(frame: Buffer, at: number): { start: number; length: number; end: number } | null {
  if (frame[at] !== 0x24) return null;
  let n = 0;
  let i = at + 1;
  for (; frame[i] !== 0x0d; i++) {
    const d = frame[i]! - 0x30;
    if (d < 0 || d > 9 || i >= frame.length) return null;
    n = n * 10 + d;
  }
  const start = i + 2;
  const end = start + n + 2;
  return end > frame.length ? null : { start, length: n, end };
}
