/**
 * Chunk bookkeeping shared by RequestFramer and ReplyFramer.
 *
 * Pushed chunks wait in a queue and are scanned one at a time (`cur`, `pos`); a subclass's
 * scanner never looks at a byte twice. The frame being scanned starts at stream offset
 * `frameAbs`. While it lies inside `cur` nothing is retained but `cur`; once the scan moves past
 * a chunk that holds part of an unfinished frame, that part is kept by reference in `parts` and
 * the whole frame is concatenated exactly once when it completes. So a frame inside one chunk is
 * a zero-copy view, and a 100 MB bulk arriving in 64 KiB pieces costs one copy, not a copy per
 * piece.
 */
import { ProtocolError } from './protocol-error.js';
import { resolveLimits, type FramerLimits } from './limits.js';

const EMPTY = Buffer.alloc(0);

export abstract class FrameAccumulator<Frame> {
  /** Chunk being scanned. */
  protected cur: Buffer = EMPTY;
  /** Next byte of `cur` to scan. */
  protected pos = 0;
  /** Stream offset of cur[0]. */
  protected curAbs = 0;
  /** Stream offset of the first byte of the frame being scanned (= end of the last one). */
  protected frameAbs = 0;

  private received = 0;
  /** The next chunk to scan (the common case: one chunk pushed, then scanned); later ones queue. */
  private nextChunk: Buffer | undefined = undefined;
  private readonly queue: Array<Buffer | undefined> = [];
  private queueHead = 0;
  /** Earlier pieces of the unfinished frame, referenced, not copied. */
  private parts: Buffer[] = [];

  protected readonly limits: FramerLimits;

  constructor(limits?: Partial<FramerLimits>) {
    this.limits = resolveLimits(limits);
  }

  /** The first protocol error; the stream cannot be resynchronised after it. */
  private failure: ProtocolError | null = null;

  /** The next complete frame, or null until more bytes arrive. Throws ProtocolError, then keeps throwing it. */
  next(): Frame | null {
    if (this.failure !== null) throw this.failure;
    try {
      for (;;) {
        if (this.pos === this.cur.length && !this.advance()) return null;
        const frame = this.scanChunk();
        if (frame !== null) return frame;
      }
    } catch (err) {
      if (err instanceof ProtocolError) this.failure = err;
      throw err;
    }
  }

  /** Scans `cur` from `pos` until a frame completes (returned) or the chunk runs out (null). */
  protected abstract scanChunk(): Frame | null;

  /** Appends a chunk; scanning is deferred to next(), so push never throws. */
  push(chunk: Buffer): void {
    if (chunk.length === 0) return;
    if (this.nextChunk === undefined && this.queueHead === this.queue.length) this.nextChunk = chunk;
    else this.queue.push(chunk);
    this.received += chunk.length;
  }

  /** Bytes held for the frame in progress plus bytes not scanned yet (for query-buffer limits). */
  get bufferedBytes(): number {
    return this.received - this.frameAbs;
  }

  /**
   * Called when `cur` is fully scanned: moves on to the next queued chunk, keeping the piece of
   * `cur` that belongs to the unfinished frame. Returns false when nothing is queued.
   */
  protected advance(): boolean {
    const cur = this.cur;
    const curEnd = this.curAbs + cur.length;
    const empty = this.nextChunk === undefined && this.queueHead === this.queue.length;
    if (this.frameAbs < curEnd) {
      if (empty) return false; // keep scanning state as is; cur still holds the frame's start
      this.parts.push(this.frameAbs > this.curAbs ? cur.subarray(this.frameAbs - this.curAbs) : cur);
    }
    this.curAbs = curEnd;
    this.pos = 0;
    if (empty) {
      // Everything in cur was handed out: drop it, so an idle connection pins no read buffer.
      this.cur = EMPTY;
      return false;
    }
    if (this.nextChunk !== undefined) {
      this.cur = this.nextChunk;
      this.nextChunk = undefined;
      return true;
    }
    this.cur = this.queue[this.queueHead]!;
    this.queue[this.queueHead++] = undefined; // let the queue forget it
    if (this.queueHead === this.queue.length) {
      this.queue.length = 0;
      this.queueHead = 0;
    }
    return true;
  }

  /** Ends the current frame just before cur[end] and returns its bytes (a view when possible). */
  protected takeFrame(end: number): Buffer {
    const endAbs = this.curAbs + end;
    let raw: Buffer;
    if (this.parts.length === 0) {
      const start = this.frameAbs - this.curAbs;
      // A chunk holding exactly one frame (a request at pipeline 1) is that frame: no view to make.
      raw = start === 0 && end === this.cur.length ? this.cur : this.cur.subarray(start, end);
    } else {
      this.parts.push(this.cur.subarray(0, end));
      raw = Buffer.concat(this.parts, endAbs - this.frameAbs);
      this.parts = [];
    }
    this.frameAbs = endAbs;
    return raw;
  }

  /** Ends the current frame just before cur[end] without materialising it (skipped requests). */
  protected dropFrame(end: number): void {
    if (this.parts.length !== 0) this.parts = [];
    this.frameAbs = this.curAbs + end;
  }

  /** Offset within the current frame of cur[p]. */
  protected frameOffset(p: number): number {
    return this.curAbs + p - this.frameAbs;
  }
}
