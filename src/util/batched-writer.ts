import type { Socket } from 'node:net';

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
 */
const COPY_LIMIT = 16 * 1024; // buffers larger than this are written as they are
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

export class BatchedWriter {
  /** The batch: `first`, then rest[0 .. restCount). `rest` is reused (a reply per turn allocates no array). */
  private first: Buffer | null = null;
  private rest: Array<Buffer | undefined> = [];
  private restCount = 0;
  /** The other `rest` array: the one a flush in progress writes from. */
  private spare: Array<Buffer | undefined> = [];
  private bytes = 0;
  private hasLarge = false;
  private scheduled = false;

  constructor(
    private readonly socket: Socket,
    private readonly when: 'immediate' | 'microtask',
  ) {}

  /** Bytes accepted but not yet handed to the socket. */
  get pendingBytes(): number {
    return this.bytes;
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

  flush(): void {
    this.scheduled = false;
    const first = this.first;
    if (first === null) return;
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
      socket.write(first);
    } else if (!hasLarge) {
      const out = Buffer.allocUnsafe(bytes);
      let at = first.copy(out, 0);
      for (let i = 0; i < restCount; i++) {
        at += rest[i]!.copy(out, at);
        rest[i] = undefined;
      }
      socket.write(out);
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
