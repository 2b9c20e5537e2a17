/**
 * Upstream → proxy framing, RESP2 and RESP3. Finds where each reply ends so it can be forwarded
 * as a byte range; values are never decoded here (see decode.ts for the few replies the proxy
 * must understand).
 *
 * Scalars end at CRLF (+ - : , ( # _) or after a declared length ($ = !). Aggregates (* % ~ > |)
 * push their remaining child count on a stack; a reply is complete when the stack empties. An
 * attribute (|) is not a value of its own: it annotates the value after it, so it is returned in
 * the same frame and does not count as a child of its parent.
 *
 * Streamed strings and aggregates ($? *? %? ... and ;chunks / . end markers) are rejected:
 * Valkey never sends them, and supporting them would only add states to the hot path.
 */
import { FrameAccumulator } from './frame-accumulator.js';
import { ProtocolError } from './protocol-error.js';

const CR = 0x0d;
const LF = 0x0a;
const MINUS = 0x2d;
const D0 = 0x30;
const D9 = 0x39;
const QUESTION = 0x3f;

// Scanner states.
const TYPE = 0; // expecting a type byte
const LINE = 1; // scanning a simple line for CR
const LINE_LF = 2;
const LENGTH = 3; // digits of a blob length ($ = !)
const COUNT = 4; // digits of an aggregate count (* % ~ > |)
const DATA = 5; // skipping blob bytes
const DATA_CR = 6;
const DATA_LF = 7;

// Phases of the resumable length parser: optional '-', digits, CR, LF.
const N_FIRST = 0;
const N_DIGITS = 1;
const N_LF = 2;
const N_DONE = 3;

/** What a type byte starts; indexed by byte value. */
const KIND_INVALID = 0;
const KIND_LINE = 1; // + - : , ( # _
const KIND_BLOB = 2; // $ = !
const KIND_AGGREGATE = 3; // * ~ >
const KIND_PAIRS = 4; // % (2 children per entry)
const KIND_ATTRIBUTE = 5; // | (2 children per entry, then the annotated value)
const KINDS = new Uint8Array(256);
for (const c of '+-:,(#_') KINDS[c.charCodeAt(0)] = KIND_LINE;
for (const c of '$=!') KINDS[c.charCodeAt(0)] = KIND_BLOB;
for (const c of '*~>') KINDS[c.charCodeAt(0)] = KIND_AGGREGATE;
KINDS['%'.charCodeAt(0)] = KIND_PAIRS;
KINDS['|'.charCodeAt(0)] = KIND_ATTRIBUTE;

const BULK = 0x24; // '$': the only blob with a RESP2 null ($-1)
const ARRAY = 0x2a; // '*': the only aggregate with a RESP2 null (*-1)

const INVALID_BULK = 'Protocol error: invalid bulk length';
const INVALID_MULTIBULK = 'Protocol error: invalid multibulk length';

export class ReplyFramer extends FrameAccumulator<Buffer> {

  private state = TYPE;
  /** Type byte of the scalar or aggregate header being scanned. */
  private type = 0;
  private kind = KIND_INVALID;
  /** Frame-relative offset where the current simple line's text starts (for the length bound). */
  private lineStart = 0;
  private numPhase = N_FIRST;
  private numValue = 0;
  private numNegative = false;
  private blobLeft = 0;

  /** Children still expected by each open aggregate, innermost last. */
  private readonly remaining: number[] = [];
  /** Whether each open aggregate is an attribute. */
  private readonly isAttribute: boolean[] = [];
  private depth = 0;

  /** Scans `cur` from `pos` until a reply completes (its bytes, a view when it sat in one chunk) or the chunk runs out (null). */
  protected scanChunk(): Buffer | null {
    const buf = this.cur;
    const len = buf.length;
    let pos = this.pos;
    while (pos < len) {
      switch (this.state) {
        case TYPE: {
          const t = buf[pos++]!;
          const kind = KINDS[t]!;
          this.type = t;
          this.kind = kind;
          if (kind === KIND_LINE) {
            this.lineStart = this.frameOffset(pos);
            this.state = LINE;
          } else if (kind === KIND_INVALID) {
            throw new ProtocolError(`Protocol error: invalid reply type byte '${String.fromCharCode(t)}'`);
          } else {
            this.numPhase = N_FIRST;
            this.numValue = 0;
            this.numNegative = false;
            this.state = kind === KIND_BLOB ? LENGTH : COUNT;
          }
          break;
        }

        case LINE: {
          // Lines are short (+OK, :1): a JS loop beats indexOf's native call.
          while (pos < len && buf[pos] !== CR) pos++;
          if (pos === len) {
            if (this.frameOffset(pos) - this.lineStart > this.limits.maxBulkLength) {
              throw new ProtocolError('Protocol error: too big reply line');
            }
            break;
          }
          pos++;
          this.state = LINE_LF;
          break;
        }

        case LINE_LF:
          if (buf[pos++] !== LF) throw new ProtocolError('Protocol error: expected LF after CR');
          if (this.valueDone()) return this.frame(pos);
          break;

        case LENGTH: {
          const bulk = this.type === BULK;
          pos = this.parseNumber(buf, pos, len, this.limits.maxBulkLength, bulk, INVALID_BULK);
          if (this.numPhase !== N_DONE) break;
          if (this.numNegative) {
            if (this.valueDone()) return this.frame(pos); // $-1: RESP2 null
            break;
          }
          const n = this.numValue;
          if (pos + n + 2 <= len) {
            // Common case: payload and CRLF are in this chunk; check them in one step.
            pos += n;
            if (buf[pos] !== CR || buf[pos + 1] !== LF) throw new ProtocolError(INVALID_BULK);
            pos += 2;
            if (this.valueDone()) return this.frame(pos);
            break;
          }
          this.blobLeft = n;
          this.state = n > 0 ? DATA : DATA_CR;
          break;
        }

        case DATA: {
          // Skip the payload in one step: blob bytes are never looked at.
          const n = Math.min(this.blobLeft, len - pos);
          pos += n;
          this.blobLeft -= n;
          if (this.blobLeft === 0) this.state = DATA_CR;
          break;
        }

        case DATA_CR:
          if (buf[pos++] !== CR) throw new ProtocolError(INVALID_BULK);
          this.state = DATA_LF;
          break;

        case DATA_LF:
          if (buf[pos++] !== LF) throw new ProtocolError(INVALID_BULK);
          if (this.valueDone()) return this.frame(pos);
          break;

        case COUNT: {
          pos = this.parseNumber(buf, pos, len, this.limits.maxArrayLength, this.type === ARRAY, INVALID_MULTIBULK);
          if (this.numPhase !== N_DONE) break;
          const kind = this.kind;
          const children = this.numNegative ? 0 : kind === KIND_AGGREGATE ? this.numValue : 2 * this.numValue;
          if (children > 0) {
            this.open(children, kind === KIND_ATTRIBUTE);
            this.state = TYPE;
          } else if (kind === KIND_ATTRIBUTE) {
            this.state = TYPE; // an empty attribute still annotates the value that follows
          } else if (this.valueDone()) {
            return this.frame(pos); // *0, %0, *-1 ...
          }
          break;
        }
      }
    }
    this.pos = pos;
    return null;
  }

  private frame(end: number): Buffer {
    this.state = TYPE;
    this.pos = end;
    return this.takeFrame(end);
  }

  private open(children: number, attribute: boolean): void {
    const d = this.depth;
    if (d >= this.limits.maxNestingDepth) throw new ProtocolError('Protocol error: reply nesting too deep');
    this.remaining[d] = children;
    this.isAttribute[d] = attribute;
    this.depth = d + 1;
  }

  /**
   * A value (scalar or whole aggregate) just ended: count it against its parent, closing every
   * aggregate it completes. True when the top-level value, and so the frame, is complete.
   */
  private valueDone(): boolean {
    this.state = TYPE;
    let d = this.depth;
    while (d > 0) {
      const i = d - 1;
      if (--this.remaining[i]! > 0) break; // the parent still needs children
      d = i; // aggregate i is complete
      if (this.isAttribute[i]) {
        this.depth = d;
        return false; // an attribute still waits for the value it annotates
      }
    }
    this.depth = d;
    return d === 0;
  }

  /**
   * Resumable parse of "<digits>\r\n" (or "-1\r\n" where a RESP2 null is allowed). Fails as soon
   * as the value exceeds `max`, so a huge declared length is rejected before any buffering.
   */
  private parseNumber(buf: Buffer, pos: number, len: number, max: number, allowNull: boolean, error: string): number {
    let phase = this.numPhase;
    let value = this.numValue;
    if (this.numNegative) max = 1;
    while (pos < len) {
      const c = buf[pos++]!;
      if (phase === N_DIGITS) {
        if (c >= D0 && c <= D9) {
          value = value * 10 + (c - D0);
          if (value > max) throw new ProtocolError(error);
          continue;
        }
        if (c !== CR || (this.numNegative && value !== 1)) throw new ProtocolError(error);
        phase = N_LF;
      } else if (phase === N_FIRST) {
        if (c >= D0 && c <= D9) {
          value = c - D0;
          if (value > max) throw new ProtocolError(error);
          phase = N_DIGITS;
        } else if (c === MINUS && allowNull && !this.numNegative) {
          this.numNegative = true; // only -1 is accepted, checked at CR
          max = 1;
        } else if (c === QUESTION) {
          throw new ProtocolError('Protocol error: streamed RESP3 types are not supported');
        } else {
          throw new ProtocolError(error);
        }
      } else {
        // N_LF
        if (c !== LF) throw new ProtocolError(error);
        phase = N_DONE;
        break;
      }
    }
    this.numPhase = phase;
    this.numValue = value;
    return pos;
  }
}
