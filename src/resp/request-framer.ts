/**
 * Client → proxy framing. Splits a client's byte stream into requests the way Valkey's
 * processMultibulkBuffer / processInlineBuffer do, without decoding anything: each request comes
 * out as its exact bytes (`raw`, forwarded as is) plus views of its arguments.
 */
import { encodeCommand } from './encode.js';
import { FrameAccumulator } from './frame-accumulator.js';
import { ProtocolError } from './protocol-error.js';

/**
 * One request: its exact bytes, and its arguments found in them on demand. Most requests only
 * need the command name and, in a cluster, their keys, so the framer records no offsets (an
 * array per request was measurable) and no argument views (V8 builds a JSTypedArray for each):
 * `argStart`/`argEnd` walk `raw`'s headers, which the framer has already checked, and `args`
 * makes views on first use.
 *
 * It is also the request handlers get (client/handler-session.ts CommandRequest): the session sets `spec`
 * and `command` from the command table, so no wrapper object is made per request.
 */
export class RequestFrame<Spec = unknown> {
  private views: Buffer[] | null;
  /** What the command table found for it (set by the session before dispatch). */
  spec: Spec | undefined = undefined;
  /** Lower-case table name, or the lower-cased first argument of an unknown command (set by the session). */
  command = '';

  constructor(
    /** The request's exact RESP bytes (a multibulk array); inline commands are re-encoded as one. */
    readonly raw: Buffer,
    views: Buffer[] | null = null,
  ) {
    this.views = views;
  }

  /** A frame from arguments already made (inline requests, copies). */
  static of(args: Buffer[], raw: Buffer): RequestFrame {
    return new RequestFrame(raw, args);
  }

  /** Views into `raw` (never copies when the frame sat in one chunk), made on first use. */
  get args(): Buffer[] {
    if (this.views !== null) return this.views;
    const views = new Array<Buffer>(this.argCount);
    if (views.length > 0) this.walk(views.length - 1, views); // always: the framer drops empty arrays
    this.views = views;
    return views;
  }

  get argCount(): number {
    if (this.views !== null) return this.views.length;
    const raw = this.raw;
    let n = 0;
    let c: number;
    for (let p = 1; (c = raw[p]!) !== CR; p++) n = n * 10 + c - D0;
    return n;
  }

  /** The buffer holding argument `i` (`raw`, or its view), and where in it the argument lies: no view made. */
  argBuffer(i: number): Buffer {
    return this.views !== null ? this.views[i]! : this.raw;
  }

  /** Where argument `i` starts in argBuffer(i): past the headers and bodies of the ones before it. */
  argStart(i: number): number {
    return this.views !== null ? 0 : this.walk(i, null);
  }

  /** Where argument `i` ends in argBuffer(i): its start plus the length in the "$<len>\r\n" just before it. */
  argEnd(i: number): number {
    if (this.views !== null) return this.views[i]!.length;
    const raw = this.raw;
    const start = this.argStart(i);
    let len = 0;
    let scale = 1;
    for (let p = start - 3; raw[p] !== DOLLAR; p--, scale *= 10) len += (raw[p]! - D0) * scale;
    return start + len;
  }

  /**
   * Walks `raw`'s "$<len>\r\n" headers (checked by the framer) from the first argument to
   * argument `i` and returns where its bytes start; `views`, when given, gets a view of every
   * argument up to and including `i`.
   */
  private walk(i: number, views: Buffer[] | null): number {
    const raw = this.raw;
    let p = raw.indexOf(LF) + 1; // past "*<n>\r\n"
    for (let k = 0; ; k++) {
      let len = 0;
      let c: number;
      p++; // '$'
      while ((c = raw[p++]!) !== CR) len = len * 10 + c - D0;
      p++; // LF: argument k starts here
      if (views !== null) views[k] = raw.subarray(p, p + len);
      if (k === i) return p;
      p += len + 2;
    }
  }
}

const CR = 0x0d;
const LF = 0x0a;
const STAR = 0x2a;
const DOLLAR = 0x24;
const MINUS = 0x2d;
const D0 = 0x30;
const D1 = 0x31;
const D9 = 0x39;

// Scanner states.
const START = 0; // first byte of a request decides: '*' multibulk, anything else inline
const INLINE = 1; // looking for '\n'
const COUNT = 2; // digits of *<count>\r\n
const BULK_HEADER = 3; // expecting '$'
const BULK_LENGTH = 4; // digits of $<len>\r\n
const BULK_DATA = 5; // skipping <len> bytes
const BULK_CR = 6;
const BULK_LF = 7;

// Phases of the resumable length parser. Like Valkey's string2ll(): optional '-', no '+', no
// leading zeros, nothing but digits, then CRLF (we also insist on the LF Valkey skips blindly).
const N_FIRST = 0;
const N_AFTER_MINUS = 1;
const N_DIGITS = 2;
const N_AFTER_ZERO = 3;
const N_LF = 4;
const N_DONE = 5;
/** Negative counts only mean "skip"; this cap just stops absurd digit strings (string2ll overflows too). */
const NEGATIVE_CAP = 9e18;

const INVALID_MULTIBULK = 'Protocol error: invalid multibulk length';
const INVALID_BULK = 'Protocol error: invalid bulk length';

export class RequestFramer extends FrameAccumulator<RequestFrame> {

  private state = START;
  private numPhase = N_FIRST;
  private numValue = 0;
  private numNegative = false;
  /** Bulk strings still expected in the current multibulk request. */
  private argsLeft = 0;
  private bulkLeft = 0;

  /** Scans `cur` from `pos` until a request completes (returned) or the chunk runs out (null). */
  protected scanChunk(): RequestFrame | null {
    const buf = this.cur;
    const len = buf.length;
    let pos = this.pos;
    let state = this.state; // a local in the loop; written back before leaving
    while (pos < len) {
      switch (state) {
        case START:
          if (buf[pos] === STAR) {
            pos++;
            this.startNumber();
            state = COUNT;
          } else {
            state = INLINE;
          }
          break;

        case INLINE: {
          const nl = buf.indexOf(LF, pos);
          if (nl === -1) {
            this.checkIncompleteInline(buf, len);
            pos = len;
            break;
          }
          pos = nl + 1;
          state = START;
          const frame = this.inlineFrame(pos);
          if (frame !== null) {
            this.state = state;
            this.pos = pos;
            return frame;
          }
          break; // empty line: skipped, like Valkey
        }

        case COUNT:
          pos = this.parseNumber(buf, pos, len, this.limits.maxArrayLength, true, INVALID_MULTIBULK);
          if (this.numPhase !== N_DONE) break;
          if (this.numNegative || this.numValue === 0) {
            // *0 and *-1 (any count <= 0) are ignored by Valkey, so they never reach upstream.
            this.dropFrame(pos);
            state = START;
            break;
          }
          this.argsLeft = this.numValue;
          state = BULK_HEADER;
          break;

        case BULK_HEADER: {
          const c = buf[pos++]!;
          if (c !== DOLLAR) {
            throw new ProtocolError(`Protocol error: expected '$', got '${String.fromCharCode(c)}'`);
          }
          this.startNumber();
          state = BULK_LENGTH;
          break;
        }

        case BULK_LENGTH: {
          pos = this.parseNumber(buf, pos, len, this.limits.maxBulkLength, false, INVALID_BULK);
          if (this.numPhase !== N_DONE) break;
          const n = this.numValue;
          if (pos + n + 2 <= len) {
            // Common case: data and CRLF are in this chunk; check them in one step.
            // (Valkey skips these two bytes unchecked; a proxy forwarding raw bytes should
            // not pass on a stream whose framing it cannot vouch for.)
            pos += n;
            if (buf[pos] !== CR || buf[pos + 1] !== LF) throw new ProtocolError(INVALID_BULK);
            pos += 2;
            if (--this.argsLeft === 0) {
              this.state = START;
              this.pos = pos;
              return new RequestFrame(this.takeFrame(pos));
            }
            state = BULK_HEADER;
          } else {
            this.bulkLeft = n;
            state = n > 0 ? BULK_DATA : BULK_CR;
          }
          break;
        }

        case BULK_DATA: {
          // Skip the payload in one step: bulk bytes are never looked at.
          const n = Math.min(this.bulkLeft, len - pos);
          pos += n;
          this.bulkLeft -= n;
          if (this.bulkLeft === 0) state = BULK_CR;
          break;
        }

        case BULK_CR:
          if (buf[pos++] !== CR) throw new ProtocolError(INVALID_BULK);
          state = BULK_LF;
          break;

        case BULK_LF:
          if (buf[pos++] !== LF) throw new ProtocolError(INVALID_BULK);
          if (--this.argsLeft === 0) {
            this.state = START;
            this.pos = pos;
            return new RequestFrame(this.takeFrame(pos));
          }
          state = BULK_HEADER;
          break;
      }
    }
    this.state = state;
    this.pos = pos;
    return null;
  }

  private startNumber(): void {
    this.numPhase = N_FIRST;
    this.numValue = 0;
    this.numNegative = false;
  }

  /**
   * Resumable parse of a length line's digits and CRLF; returns the position after the bytes it
   * consumed (numPhase === N_DONE once complete; numValue is the magnitude, numNegative the
   * sign). Fails as soon as the value exceeds `max`, so a huge declared length is rejected
   * before anything is buffered for it.
   */
  private parseNumber(buf: Buffer, pos: number, len: number, max: number, allowNegative: boolean, error: string): number {
    let phase = this.numPhase;
    let value = this.numValue;
    if (this.numNegative) max = NEGATIVE_CAP;
    while (pos < len) {
      const c = buf[pos++]!;
      if (phase === N_DIGITS) {
        if (c >= D0 && c <= D9) {
          value = value * 10 + (c - D0);
          if (value > max) throw new ProtocolError(error);
          continue;
        }
        if (c !== CR) throw new ProtocolError(error);
        phase = N_LF;
      } else if (phase === N_LF) {
        if (c !== LF) throw new ProtocolError(error);
        phase = N_DONE;
        break;
      } else if (phase === N_FIRST) {
        if (c === MINUS && allowNegative) {
          this.numNegative = true;
          max = NEGATIVE_CAP;
          phase = N_AFTER_MINUS;
        } else if (c === D0) {
          phase = N_AFTER_ZERO;
        } else if (c >= D1 && c <= D9) {
          value = c - D0;
          if (value > max) throw new ProtocolError(error);
          phase = N_DIGITS;
        } else {
          throw new ProtocolError(error);
        }
      } else if (phase === N_AFTER_MINUS) {
        if (c < D1 || c > D9) throw new ProtocolError(error);
        value = c - D0;
        phase = N_DIGITS;
      } else {
        // N_AFTER_ZERO: "0" must stand alone
        if (c !== CR) throw new ProtocolError(error);
        phase = N_LF;
      }
    }
    this.numPhase = phase;
    this.numValue = value;
    return pos;
  }

  /**
   * An inline line with no '\n' yet. Valkey refuses to buffer more than PROTO_INLINE_MAX_SIZE of
   * it; we use the same bound as for complete lines so the outcome does not depend on how the
   * stream was chunked (a trailing '\r' may still turn into the line ending).
   */
  private checkIncompleteInline(buf: Buffer, len: number): void {
    const seen = this.frameOffset(len);
    const max = this.limits.maxInlineLength;
    if (seen > max + 1 || (seen === max + 1 && buf[len - 1] !== CR)) {
      throw new ProtocolError('Protocol error: too big inline request');
    }
  }

  /** Completes an inline line ending before cur[end]; null when it holds no arguments. */
  private inlineFrame(end: number): RequestFrame | null {
    const line = this.takeFrame(end); // copies only if the line spanned chunks (inline is rare)
    let contentEnd = line.length - 1;
    if (contentEnd > 0 && line[contentEnd - 1] === CR) contentEnd--;
    if (contentEnd > this.limits.maxInlineLength) throw new ProtocolError('Protocol error: too big inline request');
    const parsed = splitInlineArgs(line.subarray(0, contentEnd));
    if (parsed === null) throw new ProtocolError('Protocol error: unbalanced quotes in request');
    if (parsed.length === 0) return null;
    // Upstream gets a proper RESP array; args become views into it.
    const raw = encodeCommand(parsed);
    const args = new Array<Buffer>(parsed.length);
    let off = 3 + String(parsed.length).length;
    for (let i = 0; i < parsed.length; i++) {
      const n = parsed[i]!.length;
      off += 3 + String(n).length;
      args[i] = raw.subarray(off, off + n);
      off += n + 2;
    }
    return RequestFrame.of(args, raw);
  }
}

const BACKSLASH = 0x5c;
const DQUOTE = 0x22;
const SQUOTE = 0x27;

/** C isspace(): what sdssplitargs skips between arguments. */
function isSpace(c: number): boolean {
  return c === 0x20 || (c >= 0x09 && c <= 0x0d);
}

function hexValue(c: number): number {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  if (c >= 0x61 && c <= 0x66) return c - 0x61 + 10;
  if (c >= 0x41 && c <= 0x46) return c - 0x41 + 10;
  return -1;
}

/**
 * Valkey's sdssplitargs(): whitespace-separated arguments with "double quotes" (escapes \n \r \t
 * \b \a \xHH and \<any>) and 'single quotes' (only \' escaped). A closing quote must be followed
 * by whitespace or the end. Returns null on unbalanced quotes. The C code sees a C string, so a
 * NUL byte ends the line; `at()` mirrors that by reading the end of the buffer as NUL.
 */
export function splitInlineArgs(line: Buffer): Buffer[] | null {
  const n = line.length;
  const at = (i: number): number => (i < n ? line[i]! : 0);
  const args: Buffer[] = [];
  let p = 0;
  for (;;) {
    while (at(p) !== 0 && isSpace(at(p))) p++;
    if (at(p) === 0) return args;
    const current: number[] = [];
    let inDouble = false;
    let inSingle = false;
    let done = false;
    while (!done) {
      const c = at(p);
      if (inDouble) {
        if (c === 0) return null; // no closing quote
        if (c === BACKSLASH && at(p + 1) === 0x78 && hexValue(at(p + 2)) >= 0 && hexValue(at(p + 3)) >= 0) {
          current.push(hexValue(at(p + 2)) * 16 + hexValue(at(p + 3)));
          p += 3;
        } else if (c === BACKSLASH && at(p + 1) !== 0) {
          p++;
          const e = at(p);
          current.push(e === 0x6e ? 0x0a : e === 0x72 ? 0x0d : e === 0x74 ? 0x09 : e === 0x62 ? 0x08 : e === 0x61 ? 0x07 : e);
        } else if (c === DQUOTE) {
          if (at(p + 1) !== 0 && !isSpace(at(p + 1))) return null; // closing quote must end the argument
          done = true;
        } else {
          current.push(c);
        }
      } else if (inSingle) {
        if (c === 0) return null;
        if (c === BACKSLASH && at(p + 1) === SQUOTE) {
          p++;
          current.push(SQUOTE);
        } else if (c === SQUOTE) {
          if (at(p + 1) !== 0 && !isSpace(at(p + 1))) return null;
          done = true;
        } else {
          current.push(c);
        }
      } else if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09 || c === 0) {
        done = true;
      } else if (c === DQUOTE) {
        inDouble = true;
      } else if (c === SQUOTE) {
        inSingle = true;
      } else {
        current.push(c);
      }
      if (at(p) !== 0) p++;
    }
    args.push(Buffer.from(current));
  }
}
