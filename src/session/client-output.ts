import type { Socket } from 'node:net';
import { ProxyError } from '../errors.js';
import type { ClientDirectory, ProxyObservability, ProxySettings } from '../client/server-context.js';
import type { ClientState } from '../client/client-state.js';
import { BatchedWriter } from '../util/batched-writer.js';
import { FifoQueue } from '../util/fifo-queue.js';
import { HOLDER_BYTES, type MemoryHolder } from '../client/memory-ceiling.js';

/** What the output asks of its session (client-session.ts). */
export interface OutputOwner extends MemoryHolder {
  readonly ctx: ProxySettings & ProxyObservability & ClientDirectory;
  readonly state: ClientState;
  readonly address: string;
  /** Stop reading its requests (the output is past half its bound). */
  pauseReading(): void;
  /** The output drained: requests may be handed on, reading may resume. */
  wake(): void;
  /** Ends the connection now (its output was dropped). */
  destroy(): void;
}

/** Replies per block of distanceMs. */
const DISTANCE_BLOCK = 128;

/** A push is written at once past this many unread bytes of output at most (the output's pause bound's cap). */
const PAUSE_CAP_BYTES = 4 * 1024 * 1024;

/**
 * A client's output (client-session.ts's `output` bound): replies and pushes on their way to its
 * socket, batched per turn (BatchedWriter), and the bounds on what it leaves unread.
 *
 *   replies  : written in order by the session's reply queue (writeReply); their running average
 *              size sizes the client's window and lane (client-session.ts window, lane-class.ts)
 *   pushes   : written now when no reply is owed (pushNow), else queued behind the replies owed
 *              and tracked by size only (queuedPush): entries leave the queue oldest first, so at
 *              most `owed` of them can still be in it (an upper bound of what is still held)
 *   bounds   : unread bytes past clients.maxOutputBytesPerClient drop the client; past half of it
 *              (at most 4 MiB) the session stops reading until the socket drains, and a client
 *              that does not drain within clients.outputStallMs is dropped too; pub/sub pushes are
 *              bounded by pubsub.maxOutputBytesPerClient (Valkey's client-output-buffer-limit
 *              pubsub), checked at each push, no timer
 */
export class ClientOutput {
  readonly writer: BatchedWriter;
  /** Reading is paused because the client does not read its replies (see `bounds`). */
  paused = false;
  repliesWritten = 0;
  /** Running average size of its last ~8 replies. */
  replyAverage = 0;
  /** Bytes handed to the writer (CLIENT LIST tot-net-out, with what is still unsent). */
  bytesOut = 0;
  private queuedPushSizes: FifoQueue<number> | null = null;
  /** distanceMs: the floors of the last two blocks of replies, newest first, and the block being counted. */
  private readonly blockFloors: [number, number] = [0, 0];
  private blockMin = Infinity;
  private blockCount = 0;
  private queuedPushBytes = 0;

  constructor(
    socket: Socket,
    private readonly session: OutputOwner,
  ) {
    this.writer = new BatchedWriter(socket, 'microtask');
  }

  /** Bytes written and not taken by the kernel, and pushes still queued behind replies. */
  unreadBytes(): number {
    return this.writer.unsentBytes + this.queuedPushBytes;
  }

  /**
   * One reply leaving the session's queue, in order. `upstreamMs`: its time at the node, send →
   * reply (0: none, answered by respool), for distanceMs.
   */
  writeReply(reply: Buffer, upstreamMs = 0): void {
    const n = ++this.repliesWritten;
    this.replyAverage += (reply.length - this.replyAverage) / (n < 8 ? n : 8); // the last ~8 replies
    if (upstreamMs > 0) this.noteUpstreamTime(upstreamMs);
    this.write(reply);
  }

  /**
   * How far its nodes are: the shortest time at the node of its last DISTANCE_BLOCK replies, and
   * of the block before (a stall is brief, a distance is not); 0 until two blocks were seen. Its
   * window grows with it (fair-admission.ts replyWindow): at a distance, a pipeline's requests
   * are on the wire, not in the node's queue.
   */
  get distanceMs(): number {
    return Math.min(this.blockFloors[0], this.blockFloors[1]);
  }

  private noteUpstreamTime(ms: number): void {
    if (ms < this.blockMin) this.blockMin = ms;
    if (++this.blockCount < DISTANCE_BLOCK) return;
    this.blockFloors[1] = this.blockFloors[0];
    this.blockFloors[0] = this.blockMin;
    this.blockMin = Infinity;
    this.blockCount = 0;
  }

  /** Calls `fn` once its unread output is at most `bytes` (now, or as the socket drains); never if the client closed first. */
  whenBelow(bytes: number, fn: () => void): void {
    const check = (): void => {
      if (this.session.closed) return;
      if (this.unreadBytes() <= bytes) return fn();
      this.writer.whenSent(check);
    };
    check();
  }

  /** A push with no reply owed: now, not at the end of the fan-out loop (BatchedWriter.writeNow). */
  pushNow(frame: Buffer): void {
    if (this.queuedPushBytes > 0) {
      this.queuedPushSizes!.drain();
      this.queuedPushBytes = 0;
    }
    this.write(frame, true);
  }

  /** A push of `size` bytes queued behind `owed` replies (the session queues the bytes). */
  queuedPush(size: number, owed: number): void {
    const sizes = (this.queuedPushSizes ??= new FifoQueue<number>());
    while (sizes.length >= owed) this.queuedPushBytes -= sizes.shift()!;
    sizes.push(size);
    this.queuedPushBytes += size;
  }

  /** After a push: past pubsub.maxOutputBytesPerClient of unread output, the client is dropped at once. */
  checkPushBound(): void {
    const unread = this.unreadBytes();
    const ctx = this.session.ctx;
    const max = ctx.config.pubsub.maxOutputBytesPerClient;
    if (unread <= max) return;
    ctx.metrics?.raw.client_disconnects_total.labels('pubsub_output').inc();
    ctx.log.warn({ client: this.session.address, unread, max, limit: 'pubsub.maxOutputBytesPerClient' }, ProxyError.outputBufferExceeded(unread, max));
    this.drop();
  }

  /** Its output is dropped and the connection ended (limits, memory ceiling, a failure). */
  drop(): void {
    this.writer.discard();
    this.session.destroy();
  }

  /** Replies produced while handling one upstream chunk leave in one write (BatchedWriter); `now`: a push, sent at once when nothing is batched before it. */
  private write(data: Buffer, now = false): void {
    if (now) this.writer.writeNow(data);
    else this.writer.write(data);
    this.bytesOut += data.length;
    const session = this.session;
    const ctx = session.ctx;
    if (ctx.metrics !== undefined) ctx.metrics.traffic.clientOut += data.length;
    session.state.tenant?.replyWritten(data.length);
    const unread = this.writer.unsentBytes;
    const max = ctx.config.clients.maxOutputBytesPerClient;
    if (unread > max) return this.dropSlow(unread);
    if (!this.paused && unread > Math.min(max / 2, PAUSE_CAP_BYTES)) this.pause();
    if (unread >= HOLDER_BYTES) ctx.memory?.grew(session);
  }

  private pause(): void {
    this.paused = true;
    this.session.pauseReading();
    // Still stalled after outputStallMs: the client is not reading; let it go (soft limit).
    const stall = setTimeout(() => {
      if (this.paused) this.dropSlow(this.writer.unsentBytes, true);
    }, this.session.ctx.config.clients.outputStallMs);
    stall.unref();
    this.writer.whenSent(() => {
      clearTimeout(stall);
      this.paused = false;
      this.session.wake();
    });
  }

  /** The client stopped reading its replies (past the limit, or for outputStallMs): disconnect it (its memory must stay bounded). */
  private dropSlow(unread: number, stalled = false): void {
    if (this.session.closed) return;
    const ctx = this.session.ctx;
    const { maxOutputBytesPerClient: max, outputStallMs } = ctx.config.clients;
    ctx.metrics?.raw.client_disconnects_total.labels('output_buffer').inc();
    const why = stalled ? ProxyError.outputStalled(unread, outputStallMs) : ProxyError.outputBufferExceeded(unread, max);
    ctx.log.warn({ event: 'client_dropped', reason: stalled ? 'output_stall' : 'output_buffer', client: this.session.address, unread, max }, why);
    this.drop();
  }
}
