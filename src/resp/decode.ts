/**
 * Full decode of one reply frame, for the few places the proxy must understand a reply (MOVED /
 * ASK, fan-out merges, topology, COMMAND INFO). Bulk strings come back as views into the frame:
 * no copies, but they keep the frame's memory alive and change if it is modified.
 */
import { DEFAULT_FRAMER_LIMITS, UNBOUNDED_NESTING } from './limits.js';
import { ProtocolError } from './protocol-error.js';

/** An error reply; `message` is the text after '-' (or the blob-error payload), e.g. "MOVED 3999 127.0.0.1:7001". */
export class RespError {
  constructor(public readonly message: string) {}
}

export type RespValue =
  | null
  | string // simple string, verbatim string (without the "txt:" prefix), big number
  | Buffer // bulk string
  | number // integer, double
  | boolean
  | RespError
  | RespValue[] // array, set, push
  | Map<RespValue, RespValue>; // map; keys that are bulk/simple strings become JS strings

const CR = 0x0d;
const LF = 0x0a;
const MINUS = 0x2d;

const INCOMPLETE = 'Protocol error: incomplete reply';

/** Cursor over one frame. */
class Reader {
  pos = 0;
  constructor(
    readonly buf: Buffer,
    readonly maxDepth: number,
  ) {}

  /** Finds the CRLF ending the current line; returns the line's end (the CR) and moves past it. */
  lineEnd(): number {
    const buf = this.buf;
    const cr = buf.indexOf(CR, this.pos);
    if (cr === -1 || cr + 1 >= buf.length) throw new ProtocolError(INCOMPLETE);
    if (buf[cr + 1] !== LF) throw new ProtocolError('Protocol error: expected LF after CR');
    this.pos = cr + 2;
    return cr;
  }

  /** The rest of the line as text. */
  line(): string {
    const start = this.pos;
    const end = this.lineEnd();
    return this.buf.toString('utf8', start, end);
  }

  /** A line holding a decimal integer (lengths, counts, ':' values). */
  integer(): number {
    const buf = this.buf;
    const start = this.pos;
    const end = this.lineEnd();
    let i = start;
    const negative = buf[i] === MINUS;
    if (negative) i++;
    if (i === end || end - i > 15) {
      // Empty, or too long to accumulate exactly: let Number() decide (it loses precision
      // beyond 2^53, which RespValue's `number` cannot avoid).
      const text = buf.toString('latin1', start, end);
      if (!/^-?\d+$/.test(text)) throw new ProtocolError(`Protocol error: invalid integer '${text}'`);
      return Number(text);
    }
    let n = 0;
    for (; i < end; i++) {
      const c = buf[i]! - 0x30;
      if (c < 0 || c > 9) throw new ProtocolError(`Protocol error: invalid integer '${buf.toString('latin1', start, end)}'`);
      n = n * 10 + c;
    }
    return negative ? -n : n;
  }

  /** A length or count line; -1 (a RESP2 null) is returned as -1, other negatives are errors. */
  length(): number {
    if (this.buf[this.pos] === 0x3f) throw new ProtocolError('Protocol error: streamed RESP3 types are not supported');
    const n = this.integer();
    if (n < -1) throw new ProtocolError('Protocol error: invalid length');
    return n;
  }

  /** `n` payload bytes followed by CRLF, as a view. */
  blob(n: number): Buffer {
    const buf = this.buf;
    const start = this.pos;
    const end = start + n;
    if (end + 2 > buf.length) throw new ProtocolError(INCOMPLETE);
    if (buf[end] !== CR || buf[end + 1] !== LF) throw new ProtocolError('Protocol error: invalid bulk length');
    this.pos = end + 2;
    return buf.subarray(start, end);
  }

  /**
   * Skips attributes (| key/value pairs) in front of a value. RespValue has no place for them;
   * a loop, not recursion, so a long run of attributes cannot overflow the stack.
   */
  skipAttributes(depth: number): void {
    while (this.buf[this.pos] === 0x7c) {
      this.pos++;
      const n = this.length();
      if (n < 0) throw new ProtocolError('Protocol error: invalid length');
      if (n > 0) this.enter(depth);
      for (let i = 0; i < 2 * n; i++) this.skip(depth + 1);
    }
  }

  value(depth: number): RespValue {
    const buf = this.buf;
    this.skipAttributes(depth);
    if (this.pos >= buf.length) throw new ProtocolError(INCOMPLETE);
    const type = buf[this.pos++]!;
    switch (type) {
      case 0x2b: // + simple string
        return this.line();
      case 0x2d: // - error
        return new RespError(this.line());
      case 0x3a: // : integer
        return this.integer();
      case 0x24: {
        // $ bulk string
        const n = this.length();
        return n === -1 ? null : this.blob(n);
      }
      case 0x2a: {
        // * array
        const n = this.length();
        return n === -1 ? null : this.list(n, depth);
      }
      case 0x5f: {
        // _ null: nothing between '_' and CRLF
        const start = this.pos;
        if (this.lineEnd() !== start) throw new ProtocolError('Protocol error: invalid null');
        return null;
      }
      case 0x23: {
        // # boolean
        const text = this.line();
        if (text === 't') return true;
        if (text === 'f') return false;
        throw new ProtocolError(`Protocol error: invalid boolean '${text}'`);
      }
      case 0x2c: // , double
        return parseDouble(this.line());
      case 0x28: {
        // ( big number: kept as text, a JS number would lose digits
        const text = this.line();
        if (!/^[-+]?\d+$/.test(text)) throw new ProtocolError(`Protocol error: invalid big number '${text}'`);
        return text;
      }
      case 0x3d: {
        // = verbatim string: "txt:" / "mkd:" format prefix, then the text
        const n = this.length();
        if (n < 4) throw new ProtocolError('Protocol error: invalid verbatim string');
        const blob = this.blob(n);
        if (blob[3] !== 0x3a) throw new ProtocolError('Protocol error: invalid verbatim string');
        return blob.toString('utf8', 4);
      }
      case 0x21: {
        // ! blob error
        const n = this.length();
        if (n < 0) throw new ProtocolError('Protocol error: invalid length');
        return new RespError(this.blob(n).toString('utf8'));
      }
      case 0x7e: // ~ set
      case 0x3e: {
        // > push
        const n = this.length();
        if (n < 0) throw new ProtocolError('Protocol error: invalid length');
        return this.list(n, depth);
      }
      case 0x25: {
        // % map
        const n = this.length();
        if (n < 0) throw new ProtocolError('Protocol error: invalid length');
        this.enter(depth);
        const map = new Map<RespValue, RespValue>();
        for (let i = 0; i < n; i++) {
          let key = this.value(depth + 1);
          if (Buffer.isBuffer(key)) key = key.toString('utf8');
          map.set(key, this.value(depth + 1));
        }
        return map;
      }
      default:
        throw new ProtocolError(`Protocol error: invalid reply type byte '${String.fromCharCode(type)}'`);
    }
  }

  list(n: number, depth: number): RespValue[] {
    this.enter(depth);
    this.checkCount(n);
    const out = new Array<RespValue>(n);
    for (let i = 0; i < n; i++) out[i] = this.value(depth + 1);
    return out;
  }

  /** Every child takes at least 3 bytes: reject impossible counts before allocating for them. */
  checkCount(children: number): void {
    if (children * 3 > this.buf.length - this.pos) throw new ProtocolError(INCOMPLETE);
  }

  /** Same bound as ReplyFramer: at most maxDepth aggregates nested (and no stack overflow). */
  enter(depth: number): void {
    if (depth >= this.maxDepth) throw new ProtocolError('Protocol error: reply nesting too deep');
  }

  /**
   * Moves past one whole value without building it. Iterative, with the open aggregates on an
   * explicit stack (as ReplyFramer keeps them), so a reply nested thousands deep — a script may
   * return one — is skipped without recursion; depth is still checked against maxDepth, counted
   * the framer's way (an attribute is a level; the value it annotates is not its child).
   */
  skip(depth: number): void {
    const buf = this.buf;
    const remaining: number[] = [];
    const isAttribute: boolean[] = [];
    for (;;) {
      if (this.pos >= buf.length) throw new ProtocolError(INCOMPLETE);
      const type = buf[this.pos++]!;
      let complete = true;
      switch (type) {
        case 0x7c: {
          // | attribute: its pairs first, then the value it annotates
          const n = this.length();
          if (n < 0) throw new ProtocolError('Protocol error: invalid length');
          if (n > 0) {
            this.enter(depth + remaining.length);
            remaining.push(2 * n);
            isAttribute.push(true);
          }
          continue;
        }
        case 0x2b:
        case 0x2d:
        case 0x3a:
        case 0x5f:
        case 0x23:
        case 0x2c:
        case 0x28:
          this.lineEnd();
          break;
        case 0x24:
        case 0x3d:
        case 0x21: {
          const n = this.length();
          if (n >= 0) this.blob(n);
          else if (type !== 0x24) throw new ProtocolError('Protocol error: invalid length');
          break;
        }
        case 0x2a:
        case 0x7e:
        case 0x3e:
        case 0x25: {
          const n = this.length();
          if (n < -1 || (n === -1 && type !== 0x2a)) throw new ProtocolError('Protocol error: invalid length');
          if (n > 0) {
            const children = type === 0x25 ? 2 * n : n;
            this.enter(depth + remaining.length);
            this.checkCount(children);
            remaining.push(children);
            isAttribute.push(false);
            complete = false;
          }
          break;
        }
        default:
          throw new ProtocolError(`Protocol error: invalid reply type byte '${String.fromCharCode(type)}'`);
      }
      if (!complete) continue;
      // A value ended: count it against the open aggregates, closing those it completes.
      for (;;) {
        const i = remaining.length - 1;
        if (i < 0) return; // the value asked for is complete
        if (--remaining[i]! > 0) break;
        remaining.pop();
        if (isAttribute.pop()) break; // an attribute still waits for the value it annotates
      }
    }
  }
}

/** RESP3 doubles: decimal or exponent notation, plus inf, -inf and nan. */
function parseDouble(text: string): number {
  switch (text) {
    case 'inf':
    case '+inf':
      return Infinity;
    case '-inf':
      return -Infinity;
    case 'nan':
    case '-nan':
      return NaN;
  }
  // Number() alone would also accept "", " 1", "0x10" and "Infinity".
  if (!/^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(text)) {
    throw new ProtocolError(`Protocol error: invalid double '${text}'`);
  }
  return Number(text);
}

/**
 * Decodes one complete frame (as ReplyFramer returns it). Throws ProtocolError if it is
 * malformed, incomplete, or followed by extra bytes.
 */
export function decodeReply(frame: Buffer, maxNestingDepth: number = DEFAULT_FRAMER_LIMITS.maxNestingDepth): RespValue {
  const reader = new Reader(frame, maxNestingDepth);
  const value = reader.value(0);
  if (reader.pos !== frame.length) throw new ProtocolError('Protocol error: trailing bytes after reply');
  return value;
}

/**
 * The child frames of an aggregate reply (* ~ > %; a map gives key, value, key, value ...) as
 * views, without decoding them: lets a fan-out merge (MGET) reassemble replies from their bytes.
 * Returns null for a null array (*-1 or _); a leading attribute is skipped. Throws
 * ProtocolError for anything else. Children of any depth by default: they are skipped, never
 * decoded (a script's deep reply inside EXEC, MGET parts).
 */
export function splitAggregate(frame: Buffer, maxNestingDepth: number = UNBOUNDED_NESTING): Buffer[] | null {
  const reader = new Reader(frame, maxNestingDepth);
  reader.skipAttributes(0);
  const type = frame[reader.pos];
  if (type === 0x5f) {
    reader.skip(0);
    if (reader.pos !== frame.length) throw new ProtocolError('Protocol error: trailing bytes after reply');
    return null;
  }
  if (type !== 0x2a && type !== 0x7e && type !== 0x3e && type !== 0x25) {
    throw new ProtocolError('Protocol error: expected an aggregate reply');
  }
  reader.pos++;
  const n = reader.length();
  if (n === -1 && type !== 0x2a) throw new ProtocolError('Protocol error: invalid length');
  let children: Buffer[] | null = null;
  if (n >= 0) {
    const count = type === 0x25 ? 2 * n : n;
    reader.enter(0);
    reader.checkCount(count);
    children = new Array<Buffer>(count);
    for (let i = 0; i < count; i++) {
      const start = reader.pos;
      reader.skip(1);
      children[i] = frame.subarray(start, reader.pos);
    }
  }
  if (reader.pos !== frame.length) throw new ProtocolError('Protocol error: trailing bytes after reply');
  return children;
}

/** The complete frames lying back to back in `frames` (a run of pushes), as views into it. */
export function splitFrames(frames: Buffer): Buffer[] {
  const reader = new Reader(frames, UNBOUNDED_NESTING);
  const out: Buffer[] = [];
  while (reader.pos < frames.length) {
    const start = reader.pos;
    reader.skip(0);
    out.push(frames.subarray(start, reader.pos));
  }
  return out;
}

/** The bytes of a bulk-string frame, as a view into it; null for a nil ($-1, _) or any other type. */
export function bulkPayload(frame: Buffer): Buffer | null {
  if (frame[0] !== 0x24 /* $ */ || frame[1] === 0x2d /* - */) return null;
  return frame.subarray(frame.indexOf(0x0a) + 1, frame.length - 2);
}
