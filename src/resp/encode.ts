/**
 * RESP encoders. Each builds exactly one Buffer of the exact size (Buffer.allocUnsafe draws small
 * sizes from Node's shared pool, so a short command costs one cheap allocation).
 */
import { NULL_BULK_RESP2, NULL_RESP3 } from './constant-replies.js';

const CR = 0x0d;
const LF = 0x0a;
const STAR = 0x2a;
const DOLLAR = 0x24;
const PERCENT = 0x25;
const TILDE = 0x7e;

/** Number of decimal digits of a non-negative integer. */
function decimalLength(n: number): number {
  if (n < 10) return 1;
  if (n < 100) return 2;
  if (n < 1000) return 3;
  if (n < 10000) return 4;
  if (n < 100000) return 5;
  let d = 6;
  for (let x = Math.floor(n / 1000000); x > 0; x = Math.floor(x / 10)) d++;
  return d;
}

/** Writes a non-negative integer as ASCII digits at `off`; returns the offset after it. */
function writeDecimal(out: Buffer, off: number, n: number): number {
  const end = off + decimalLength(n);
  let p = end;
  do {
    out[--p] = 0x30 + (n % 10);
    n = Math.floor(n / 10);
  } while (n > 0);
  return end;
}

/** Writes `<prefix><n>\r\n`; returns the offset after it. */
function writeHeader(out: Buffer, off: number, prefix: number, n: number): number {
  out[off] = prefix;
  off = writeDecimal(out, off + 1, n);
  out[off] = CR;
  out[off + 1] = LF;
  return off + 2;
}

// Short strings: measuring and writing in JS beats a round trip into C++ per argument.
const SHORT_STRING = 64;

function utf8Length(s: string): number {
  if (s.length > SHORT_STRING) return Buffer.byteLength(s, 'utf8');
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) n += 1;
    else if (c < 0x800) n += 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length && (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      n += 4; // surrogate pair
      i++;
    } else n += 3; // includes lone surrogates, which Buffer encodes as U+FFFD
  }
  return n;
}

/** Writes `s` whose UTF-8 length is `byteLength`; returns the offset after it. */
function writeString(out: Buffer, off: number, s: string, byteLength: number): number {
  if (byteLength === s.length && byteLength <= SHORT_STRING) {
    for (let i = 0; i < byteLength; i++) out[off + i] = s.charCodeAt(i); // pure ASCII
    return off + byteLength;
  }
  return off + out.write(s, off, byteLength, 'utf8');
}

/** A command as a RESP array of bulk strings, e.g. ['GET', 'k'] → *2\r\n$3\r\nGET\r\n$1\r\nk\r\n. */
export function encodeCommand(args: ReadonlyArray<string | Buffer | number>): Buffer {
  const n = args.length;
  const lengths = new Array<number>(n);
  let size = 3 + decimalLength(n);
  for (let i = 0; i < n; i++) {
    const a = args[i]!;
    const len = typeof a === 'string' ? utf8Length(a) : typeof a === 'number' ? String(a).length : a.length;
    lengths[i] = len;
    size += len + 5 + decimalLength(len);
  }
  const out = Buffer.allocUnsafe(size);
  let off = writeHeader(out, 0, STAR, n);
  for (let i = 0; i < n; i++) {
    const a = args[i]!;
    const len = lengths[i]!;
    off = writeHeader(out, off, DOLLAR, len);
    if (typeof a === 'string') off = writeString(out, off, a, len);
    else if (typeof a === 'number') off += out.write(String(a), off, len, 'latin1');
    else {
      out.set(a, off);
      off += len;
    }
    out[off] = CR;
    out[off + 1] = LF;
    off += 2;
  }
  return out;
}

/**
 * CR and LF would end the line early and desynchronise the client; Valkey replaces them with
 * spaces in error replies, and so do we (for simple strings too).
 */
function oneLine(s: string): string {
  return /[\r\n]/.test(s) ? s.replace(/[\r\n]/g, ' ') : s;
}

/** A simple-string-like line: prefix byte, text, CRLF. */
function encodeLine(prefix: string, text: string): Buffer {
  const s = oneLine(text);
  const len = utf8Length(s);
  const out = Buffer.allocUnsafe(len + 3);
  out[0] = prefix.charCodeAt(0);
  const off = writeString(out, 1, s, len);
  out[off] = CR;
  out[off + 1] = LF;
  return out;
}

/** "-" + message + CRLF, e.g. encodeError('ERR unknown command'). CR/LF become spaces. */
export function encodeError(message: string): Buffer {
  return encodeLine('-', message);
}

/** "+" + s + CRLF. CR/LF become spaces. */
export function encodeSimple(s: string): Buffer {
  return encodeLine('+', s);
}

/** A bulk string; null is $-1 in RESP2 and _ in RESP3 (shared constants, do not modify). */
export function encodeBulk(b: Buffer | string | null, proto: 2 | 3): Buffer {
  if (b === null) return proto === 3 ? NULL_RESP3 : NULL_BULK_RESP2;
  const len = typeof b === 'string' ? utf8Length(b) : b.length;
  const out = Buffer.allocUnsafe(len + 5 + decimalLength(len));
  let off = writeHeader(out, 0, DOLLAR, len);
  if (typeof b === 'string') off = writeString(out, off, b, len);
  else {
    out.set(b, off);
    off += len;
  }
  out[off] = CR;
  out[off + 1] = LF;
  return out;
}

/** ":" + n + CRLF. A non-integer number is a programming error (RangeError). */
export function encodeInteger(n: number | bigint): Buffer {
  let text: string;
  if (typeof n === 'bigint') text = n.toString();
  else if (Number.isSafeInteger(n)) text = String(n);
  else if (Number.isInteger(n)) text = BigInt(n).toString(); // String(1e21) would be "1e+21"
  else throw new RangeError(`encodeInteger: not an integer: ${n}`);
  return Buffer.from(`:${text}\r\n`, 'latin1');
}

/** Writes `header` + concatenated `items` into one exact-size buffer. */
function encodeAggregate(prefix: number, count: number, items: ReadonlyArray<Buffer>, payload: number): Buffer {
  const out = Buffer.allocUnsafe(payload + 3 + decimalLength(count));
  let off = writeHeader(out, 0, prefix, count);
  for (let i = 0; i < items.length; i++) {
    const item = items[i]!;
    out.set(item, off);
    off += item.length;
  }
  return out;
}

/** "*N" + the already-encoded items. */
export function encodeArray(items: Buffer[]): Buffer {
  let payload = 0;
  for (let i = 0; i < items.length; i++) payload += items[i]!.length;
  return encodeAggregate(STAR, items.length, items, payload);
}

/** A map of already-encoded keys and values: "%N" in RESP3, a flat "*2N" array in RESP2. */
export function encodeMap(entries: Array<[Buffer, Buffer]>, proto: 2 | 3): Buffer {
  const flat: Buffer[] = new Array<Buffer>(entries.length * 2);
  let payload = 0;
  for (let i = 0; i < entries.length; i++) {
    const [k, v] = entries[i]!;
    flat[2 * i] = k;
    flat[2 * i + 1] = v;
    payload += k.length + v.length;
  }
  return proto === 3
    ? encodeAggregate(PERCENT, entries.length, flat, payload)
    : encodeAggregate(STAR, flat.length, flat, payload);
}

/** A verbatim string in RESP3 (`=len\r\ntxt:…`, as Valkey answers INFO), a bulk string in RESP2. */
export function encodeVerbatim(text: string, proto: 2 | 3): Buffer {
  if (proto === 2) return encodeBulk(text, 2);
  const body = Buffer.from(`txt:${text}`, 'utf8');
  return Buffer.concat([Buffer.from(`=${body.length}\r\n`), body, Buffer.from('\r\n')]);
}

/** A set of already-encoded items: "~N" in RESP3, an array in RESP2 (ACL GETUSER's flags). */
export function encodeSet(items: Buffer[], proto: 2 | 3): Buffer {
  if (proto === 2) return encodeArray(items);
  let payload = 0;
  for (let i = 0; i < items.length; i++) payload += items[i]!.length;
  return encodeAggregate(TILDE, items.length, items, payload);
}

/** A double as Valkey's addReplyDouble: `,d` in RESP3, a bulk string in RESP2; d2string's text (integers without a point). */
export function encodeDouble(d: number, proto: 2 | 3): Buffer {
  const text = Number.isNaN(d) ? 'nan' : d === Infinity ? 'inf' : d === -Infinity ? '-inf' : Object.is(d, -0) ? '-0' : String(d);
  return proto === 3 ? Buffer.from(`,${text}\r\n`, 'latin1') : encodeBulk(text, 2);
}

/** Bytes of a RESP bulk string of `n` bytes (`$n\r\n…\r\n`): sizing a command written in place. */
export function bulkSize(n: number): number {
  return n + 5 + decimalLength(n);
}

/** Bytes of an aggregate header (`*n\r\n`). */
export function arrayHeaderSize(n: number): number {
  return 3 + decimalLength(n);
}

/** Writes `*n\r\n` at `off`; returns the offset after it. */
export function writeArrayHeader(out: Buffer, off: number, n: number): number {
  return writeHeader(out, off, STAR, n);
}

/** Writes `b` as a bulk string at `off`; returns the offset after it. */
export function writeBulk(out: Buffer, off: number, b: Buffer): number {
  off = writeHeader(out, off, DOLLAR, b.length);
  out.set(b, off);
  off += b.length;
  out[off] = CR;
  out[off + 1] = LF;
  return off + 2;
}
