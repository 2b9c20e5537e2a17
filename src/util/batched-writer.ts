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

let immediateQueue: BatchedWriter[] = [];
let immediateScheduled = false;

function flushImmediateQueue(): void {
  const queue = immediateQueue;
  immediateQueue = [];
  immediateScheduled = false;
  for (const writer of queue) writer.flush();
}

export class BatchedWriter {
  private chunks: Buffer[] = [];
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
    this.chunks.push(data);
    this.bytes += data.length;
    if (data.length > COPY_LIMIT) this.hasLarge = true;
    if (this.bytes >= FLUSH_BYTES) {
      this.flush();
      return;
    }
    if (this.scheduled) return;
    this.scheduled = true;
    if (this.when === 'microtask') {
      queueMicrotask(this.flushBound);
    } else {
      immediateQueue.push(this);
      if (!immediateScheduled) {
        immediateScheduled = true;
        setImmediate(flushImmediateQueue);
      }
    }
  }

  private readonly flushBound = (): void => this.flush();

  flush(): void {
    this.scheduled = false;
    const { chunks } = this;
    if (chunks.length === 0) return;
    this.chunks = [];
    const bytes = this.bytes;
    this.bytes = 0;
    if (this.socket.destroyed) return;
    if (chunks.length === 1) {
      this.socket.write(chunks[0]!);
    } else if (!this.hasLarge) {
      this.socket.write(Buffer.concat(chunks, bytes));
    } else {
      this.socket.cork();
      for (const chunk of chunks) this.socket.write(chunk);
      this.socket.uncork();
    }
    this.hasLarge = false;
  }

  /** Drops whatever is pending (the socket is going away). */
  discard(): void {
    this.chunks = [];
    this.bytes = 0;
    this.hasLarge = false;
  }
}
