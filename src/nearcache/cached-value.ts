/**
 * What the near cache holds of a key, read off a fill's reply, and the reply each cached read
 * gets from it in the client's protocol — byte for byte what the node answers:
 *
 *   none   : the key does not exist (GET's nil, HGETALL's empty map): every read's "nothing"
 *   string : GET's bulk reply, kept as it came
 *   hash   : HGETALL's field/value bulk frames in the node's order, and where each value starts
 *
 *   read      none           string              hash
 *   GET       nil            the value           WRONGTYPE
 *   GETRANGE  ""             the range           WRONGTYPE
 *   STRLEN    0              its length          WRONGTYPE
 *   EXISTS    0              1                   1
 *   HGET      nil            WRONGTYPE           the field's value or nil
 *   HMGET     nils           WRONGTYPE           each field's value or nil
 *   HGETALL   empty          WRONGTYPE           every pair (RESP3 map, RESP2 flat array)
 *   HLEN      0              WRONGTYPE           the count of fields
 *   HEXISTS   0              WRONGTYPE           1 or 0
 *   HSTRLEN   0              WRONGTYPE           the value's length or 0
 *   MGET's    nil            the value           nil
 *   one key
 */

export type CachedRead = 'get' | 'getrange' | 'strlen' | 'exists' | 'hget' | 'hmget' | 'hgetall' | 'hlen' | 'hexists' | 'hstrlen' | 'mgetpart';

/** The node command whose reply fills an entry for this read. */
export function fillCommand(kind: CachedRead): 'GET' | 'HGETALL' {
  return kind === 'get' || kind === 'getrange' || kind === 'strlen' || kind === 'exists' || kind === 'mgetpart' ? 'GET' : 'HGETALL';
}

export type CachedValue =
  | { readonly type: 'none' }
  | { readonly type: 'string'; readonly frame: Buffer }
  | { readonly type: 'hash'; readonly pairs: Buffer; readonly count: number; readonly values: ReadonlyMap<string, number> };

export const NONE: CachedValue = { type: 'none' };

/** Bytes a hash field costs in the index beyond its name (the Map slot, the offset). */
const FIELD_OVERHEAD = 48;

export function valueBytes(value: CachedValue): number {
  switch (value.type) {
    case 'none':
      return 0;
    case 'string':
      return value.frame.length;
    case 'hash': {
      let n = value.pairs.length;
      for (const field of value.values.keys()) n += field.length + FIELD_OVERHEAD;
      return n;
    }
  }
}

/** The value a fill's reply holds, or null when it holds none (an error, an unexpected shape). */
export function valueOf(command: 'GET' | 'HGETALL', reply: Buffer): CachedValue | null {
  if (command === 'GET') {
    if (reply[0] === 0x5f /* _ */) return NONE;
    return reply[0] === 0x24 /* $ */ ? { type: 'string', frame: reply } : null;
  }
  if (reply[0] !== 0x25 /* % */) return null;
  let at = reply.indexOf(0x0d);
  const count = Number(reply.toString('latin1', 1, at));
  if (count === 0) return NONE; // Valkey has no empty hash: the key does not exist
  at += 2;
  const start = at;
  const values = new Map<string, number>();
  for (let i = 0; i < count; i++) {
    const field = bulkAt(reply, at);
    if (field === null) return null;
    const valueAt = field.end;
    const value = bulkAt(reply, valueAt);
    if (value === null) return null;
    values.set(reply.toString('latin1', field.start, field.start + field.length), valueAt - start);
    at = value.end;
  }
  return { type: 'hash', pairs: reply.subarray(start, at), count, values };
}

const NULL2 = Buffer.from('$-1\r\n');
const NULL3 = Buffer.from('_\r\n');
const ONE = Buffer.from(':1\r\n');
const ZERO = Buffer.from(':0\r\n');
const EMPTY2 = Buffer.from('*0\r\n');
const EMPTY3 = Buffer.from('%0\r\n');
export const WRONGTYPE = Buffer.from('-WRONGTYPE Operation against a key holding the wrong kind of value\r\n');

/** The reply `kind` (with its arguments past the key: the fields) gets from `value`, in `protocol`. */
export function replyFor(value: CachedValue, kind: CachedRead, fields: readonly Buffer[], protocol: 2 | 3): Buffer {
  const nil = protocol === 3 ? NULL3 : NULL2;
  if (kind === 'exists') return value.type === 'none' ? ZERO : ONE;
  if (kind === 'mgetpart') return value.type === 'string' ? value.frame : nil;
  if (value.type === 'none') {
    if (kind === 'get' || kind === 'hget') return nil;
    if (kind === 'getrange') return EMPTY_BULK;
    if (kind === 'hmget') return Buffer.concat([Buffer.from(`*${fields.length}\r\n`), ...fields.map(() => nil)]);
    if (kind === 'hgetall') return protocol === 3 ? EMPTY3 : EMPTY2;
    return ZERO; // STRLEN, HLEN, HEXISTS, HSTRLEN
  }
  const forString = kind === 'get' || kind === 'strlen' || kind === 'getrange';
  if ((value.type === 'string') !== forString) return WRONGTYPE;
  if (value.type === 'string') {
    if (kind === 'get') return value.frame;
    const bulk = bulkAt(value.frame, 0)!;
    return kind === 'strlen' ? integer(bulk.length) : range(value.frame.subarray(bulk.start, bulk.start + bulk.length), Number(fields[0]), Number(fields[1]));
  }
  switch (kind) {
    case 'hget':
      return fieldValue(value, fields[0]!) ?? nil;
    case 'hmget':
      return Buffer.concat([Buffer.from(`*${fields.length}\r\n`), ...fields.map((f) => fieldValue(value, f) ?? nil)]);
    case 'hgetall':
      return Buffer.concat([Buffer.from(protocol === 3 ? `%${value.count}\r\n` : `*${value.count * 2}\r\n`), value.pairs]);
    case 'hlen':
      return integer(value.count);
    case 'hexists':
      return value.values.has(fields[0]!.toString('latin1')) ? ONE : ZERO;
    default: {
      const frame = fieldValue(value, fields[0]!); // HSTRLEN
      return frame === null ? ZERO : integer(bulkAt(frame, 0)!.length);
    }
  }
}

function fieldValue(value: Extract<CachedValue, { type: 'hash' }>, field: Buffer): Buffer | null {
  const at = value.values.get(field.toString('latin1'));
  if (at === undefined) return null;
  return value.pairs.subarray(at, bulkAt(value.pairs, at)!.end);
}

/** GETRANGE's reply (Valkey's getrangeCommand: negative indexes from the end, clamped; nothing when start > end). */
function range(str: Buffer, start: number, end: number): Buffer {
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

/** GETRANGE's integer arguments as Valkey reads them (string2ll), within JavaScript's exact range; else null (the node answers). */
export function rangeIndex(arg: Buffer): number | null {
  const text = arg.toString('latin1');
  if (!/^(0|-?[1-9][0-9]{0,14})$/.test(text)) return null;
  return Number(text);
}

const CRLF = Buffer.from('\r\n');
const EMPTY_BULK = Buffer.from('$0\r\n\r\n');

function integer(n: number): Buffer {
  return Buffer.from(`:${n}\r\n`);
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
