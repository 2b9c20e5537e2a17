import type { Socket } from 'node:net';
import { directHandle, writeDirect, type DirectWriteOwner } from './direct-write.js';
import { clockNow } from './read-clock.js';

/**
 * Collects the small buffers written to one socket and sends them as ONE buffer per batch.
 *
 * Why not cork/uncork (writev)? Measured with `node --cpu-prof` under valkey-benchmark -P 16:
 * corked writev calls carrying hundreds of tiny iovecs took ~30% of respool's CPU; joining the
 * batch into one buffer (a memcpy of a few KB) and writing it once is cheaper for the kernel
 * and for Node's stream machinery. Big buffers are not copied: a batch holding one is
 * written piecewise.
 *
 * Two flush moments:
 *  - 'immediate' (upstream links): everything written while the event loop handled this turn's
 *    I/O callbacks — many clients' requests — leaves in one write after the poll phase;
 *  - 'microtask' (client sockets): replies produced while handling one upstream chunk leave
 *    together as soon as that handler returns.
 *
 * A batch goes straight to the socket's TCP handle when nothing else is queued for it
 * (util/direct-write.ts: Node's Writable costs more per write than anything else respool can
 * avoid at pipeline 1); otherwise through socket.write. Order holds either way: a direct write
 * is made only when the Writable is empty and libuv holds no earlier direct write, and while it
 * holds one, batches go through the Writable, whose writes libuv queues behind it.
 *
 *   write(data) ─▶ [batch: `bytes`] ─flush─┬─▶ direct write ──▶ kernel  (libuv may hold a tail: `inFlight`)
 *                                           └─▶ socket.write ─▶ Writable ─▶ kernel
 *   invariants: a direct write only when inFlight = 0 and the Writable is empty (order);
 *               unsentBytes = bytes + inFlight + writableLength, what the kernel has not taken.
 */
const COPY_LIMIT = 16 * 1024; // buffers larger than this are written as they are
/** CLIENT LIST's rbp: the peak of about the last 5 s, as Valkey's reply-buffer peak (reset in clientsCron). */
const PEAK_MS = 5000;
/** The buffer small replies are joined in (CLIENT LIST rbs): replies above COPY_LIMIT are written as they are. */
export const JOIN_BUFFER_BYTES = COPY_LIMIT;
const FLUSH_BYTES = 256 * 1024; // flush at once past this many pending bytes

/**
 * Writers with a flush due at one moment, flushed by ONE scheduled callback for all of them
 * (Node's queueMicrotask builds an AsyncResource per call: one per reply was measurable).
 */
class DueWriters {
  private writers: BatchedWriter[] = [];
  private scheduled = false;

  constructor(private readonly schedule: (run: () => void) => unknown) {}

  add(writer: BatchedWriter): void {
    this.writers.push(writer);
    if (this.scheduled) return;
    this.scheduled = true;
    this.schedule(this.run);
  }

  private readonly run = (): void => {
    const writers = this.writers;
    this.writers = [];
    this.scheduled = false;
    for (const writer of writers) writer.flush();
  };
}

const due = { immediate: new DueWriters(setImmediate), microtask: new DueWriters(queueMicrotask) };

export class BatchedWriter implements DirectWriteOwner {
  /** The batch: `first`, then rest[0 .. restCount). `rest` is reused (a reply per turn allocates no array). */
  private first: Buffer | null = null;
  private rest: Array<Buffer | undefined> = [];
  private restCount = 0;
  /** The other `rest` array: the one a flush in progress writes from. */
  private spare: Array<Buffer | undefined> = [];
  private bytes = 0;
  private hasLarge = false;
  private scheduled = false;
  /** Bytes of the one direct write libuv queued and has not finished (0: none). */
  private inFlight = 0;
  /** Called once everything written so far has reached the kernel (whenSent). */
  private sentWaiters: Array<() => void> | null = null;
  private waitingForDrain = false;
  /** Batches flushed so far (an upstream link's writes: respool_upstream_io_total{op="writes"}). */
  batches = 0;
  /** The largest batch of small writes flushed, and when (util/read-clock.ts): CLIENT LIST's rbp. */
  private peak = 0;
  private peakAt = 0;

  constructor(
    private readonly socket: Socket,
    private readonly when: 'immediate' | 'microtask',
  ) {}

  /** Bytes written here that the kernel has not taken yet: batched, held by libuv, or in the Writable. */
  get unsentBytes(): number {
    return this.bytes + this.inFlight + this.socket.writableLength;
  }

  /** Bytes of the batch not yet handed to the socket (CLIENT LIST obl). */
  get batchedBytes(): number {
    return this.bytes;
  }

  /**
   * Calls `fn` once every byte written so far has been handed to the kernel (at the earliest on
   * the next turn), or never if the socket is destroyed meanwhile. Replaces the socket's 'drain',
   * which direct writes do not emit.
   */
  whenSent(fn: () => void): void {
    (this.sentWaiters ??= []).push(fn);
    if (this.sentWaiters.length === 1) setImmediate(() => this.checkSent());
  }

  /** libuv finished a direct write it had queued (util/direct-write.ts). */
  directWriteDone(error: Error | null): void {
    this.inFlight = 0;
    if (error !== null) {
      if (!this.socket.destroyed) this.socket.destroy(error);
      return;
    }
    this.checkSent();
  }

  private checkSent(): void {
    const waiters = this.sentWaiters;
    if (waiters === null) return;
    if (this.socket.destroyed) {
      this.sentWaiters = null;
      return;
    }
    // A flush, the direct write's completion or the socket's 'drain' calls this again.
    if (this.first !== null || this.inFlight > 0) return;
    if (this.socket.writableNeedDrain) {
      if (this.waitingForDrain) return;
      this.waitingForDrain = true;
      this.socket.once('drain', () => {
        this.waitingForDrain = false;
        this.checkSent();
      });
      return;
    }
    this.sentWaiters = null;
    for (const fn of waiters) fn();
  }

  write(data: Buffer): void {
    if (this.first === null) this.first = data;
    else this.rest[this.restCount++] = data;
    this.bytes += data.length;
    if (data.length > COPY_LIMIT) this.hasLarge = true;
    if (this.bytes >= FLUSH_BYTES) {
      this.flush();
      return;
    }
    if (this.scheduled) return;
    this.scheduled = true;
    due[this.when].add(this);
  }

  /**
   * `data` to the kernel now, when nothing is batched before it; otherwise behind the batch (order
   * first). For pub/sub fan-out: one message to 10,000 subscribers must not wait until the last
   * subscriber's copy is queued before the first one leaves (the microtask batch would hold every
   * write until the whole loop ran); the caller has already joined what one read carried.
   */
  writeNow(data: Buffer): void {
    if (this.first !== null) {
      this.write(data);
      return;
    }
    this.batches++;
    if (this.socket.destroyed) return;
    this.send(data);
    if (this.sentWaiters !== null) this.checkSent();
  }

  flush(): void {
    this.scheduled = false;
    const first = this.first;
    if (first === null) return;
    this.batches++;
    const { rest, restCount, bytes, hasLarge, socket } = this;
    // The batch is taken whole before writing: a write made meanwhile starts the next batch.
    this.first = null;
    this.restCount = 0;
    this.bytes = 0;
    this.hasLarge = false;
    if (restCount > 0) {
      this.rest = this.spare;
      this.spare = rest;
    }
    if (socket.destroyed) {
      rest.fill(undefined, 0, restCount);
      return;
    }
    if (restCount === 0) {
      if (bytes <= COPY_LIMIT) this.notePeak(bytes);
      this.send(first);
    } else if (!hasLarge) {
      this.notePeak(bytes);
      const out = Buffer.allocUnsafe(bytes);
      let at = first.copy(out, 0);
      for (let i = 0; i < restCount; i++) {
        at += rest[i]!.copy(out, at);
        rest[i] = undefined;
      }
      this.send(out);
    } else {
      socket.cork();
      socket.write(first);
      for (let i = 0; i < restCount; i++) {
        socket.write(rest[i]!);
        rest[i] = undefined;
      }
      socket.uncork();
    }
    if (rest.length > 1024) this.spare = []; // a burst's array is not kept
    if (this.sentWaiters !== null) this.checkSent();
  }

  /** One buffer to the kernel: straight to the handle when nothing is queued before it. */
  private send(data: Buffer): void {
    const handle = this.inFlight === 0 ? directHandle(this.socket) : null;
    if (handle !== null) {
      const result = writeDirect(handle, data, this);
      if (result >= 0) {
        if (result === 1) this.inFlight = data.length;
        return;
      }
    }
    this.socket.write(data);
  }

  /** The largest batch of small writes flushed in about the last PEAK_MS (0: none since). */
  peakBatch(now: number): number {
    if (now - this.peakAt > PEAK_MS) this.peak = 0; // a new period: the next batches set it again
    return this.peak;
  }

  /** A new peak only costs a clock read (CLIENT LIST reads it rarely; see peakBatch). */
  private notePeak(bytes: number): void {
    if (bytes <= this.peak) return;
    this.peak = bytes;
    this.peakAt = clockNow();
  }

  /** Drops whatever is pending (the socket is going away). */
  discard(): void {
    this.rest.fill(undefined, 0, this.restCount);
    this.first = null;
    this.restCount = 0;
    this.bytes = 0;
    this.hasLarge = false;
  }
}
