import type { Socket } from 'node:net';
import { RequestFramer, type RequestFrame } from '../resp/request-framer.js';
import { ProtocolError } from '../resp/protocol-error.js';
import { encodeError } from '../resp/encode.js';
import { ProxyError } from '../errors.js';
import { FifoQueue } from '../util/fifo-queue.js';
import type { ReplyEntry, ReplySink } from '../routing/proxy-request.js';
import { proxyHandling } from '../commands/proxy-handling.js';
import { runLocalCommand, AUTH_EXEMPT } from './local-commands.js';
import type { ServerContext } from './server-context.js';
import { BatchedWriter } from '../util/batched-writer.js';
import { isRespoolCommand, runRespoolCommand } from '../hotkeys/control.js';

/**
 * One client connection: frames its requests, answers the local ones, hands the rest to the
 * router, and writes replies back strictly in request order.
 *
 *   replies : one entry per request, in the order the requests arrived
 *             [ oldest … newest ]; an entry is done once its `reply` is set
 *   invariant: only the head is ever written; a finished entry behind an unfinished one waits
 *             (its bytes copied, since link read buffers are not ours to keep).
 *   bound    : at most limits.maxPendingPerClient entries; at the bound the session stops
 *             reading the socket (TCP backpressure reaches the client) until half have drained.
 *   output   : replies written but not yet read by the client (socket buffer) stay under
 *             clients.maxOutputBytesPerClient; past it the client is disconnected (like Valkey's
 *             client-output-buffer-limit), so a client that stops reading cannot hold memory.
 *             Past half of it (at most 4 MiB) the session stops reading that client's requests
 *             until the socket drains: a slow reader stops adding work to the shared links; if it
 *             does not drain within clients.outputStallMs, the client is disconnected too.
 *   idle     : clients.idleTimeoutMs without traffic and nothing pending closes the connection.
 */
export class ClientSession implements ReplySink {
  readonly id: number;
  protocol: 2 | 3 = 2;
  name: string | null = null;
  libName = '';
  libVersion = '';
  /** The authenticated user, or null while AUTH is still required. */
  user: string | null;
  closed = false;
  readonly createdAt = Date.now();

  private readonly framer: RequestFramer;
  private readonly replies = new FifoQueue<ReplyEntry>();
  private readingPaused = false;
  /** Reading paused because the client is not reading its replies (see `output` above). */
  private outputPaused = false;
  private closeWhenFlushed = false;
  private readonly writer: BatchedWriter;

  constructor(
    readonly socket: Socket,
    private readonly ctx: ServerContext,
  ) {
    this.id = ctx.nextClientId();
    this.user = ctx.config.users.length === 0 ? 'default' : null;
    const { limits } = ctx.config;
    this.framer = new RequestFramer({
      maxBulkLength: limits.maxBulkLength,
      maxArrayLength: limits.maxArrayLength,
      maxInlineLength: limits.maxInlineLength,
    });
    // TCP_NODELAY is set on accept by the listener (net.createServer({ noDelay: true })).
    const { tcpKeepAliveMs, idleTimeoutMs } = ctx.config.clients;
    if (tcpKeepAliveMs > 0) socket.setKeepAlive(true, tcpKeepAliveMs);
    if (idleTimeoutMs > 0) {
      socket.setTimeout(idleTimeoutMs);
      socket.on('timeout', () => this.onIdle());
    }
    this.writer = new BatchedWriter(socket, 'microtask');
    socket.on('data', (chunk: Buffer) => this.onData(chunk));
    socket.on('close', () => this.onClose());
    socket.on('error', () => {}); // 'close' follows; a client's reset is not respool's error
  }

  get pending(): number {
    return this.replies.length;
  }

  get address(): string {
    return `${this.socket.remoteAddress}:${this.socket.remotePort}`;
  }

  get localAddress(): string {
    return `${this.socket.localAddress}:${this.socket.localPort}`;
  }

  /** Router and local commands finish entries through here. */
  onRequestDone(entry: ReplyEntry): void {
    if (this.replies.peek() === entry) {
      this.flushHead();
    } else if (entry.reply !== null) {
      entry.reply = Buffer.from(entry.reply); // it must outlive the link's read buffer
    }
  }

  /** Queues a reply that is already known (local commands, refusals). */
  replyNow(reply: Buffer): void {
    this.enqueue({ reply });
  }

  /**
   * Takes its place in the reply queue. An entry may already be done when it gets here (a
   * node refused it synchronously): then, if nothing is ahead of it, it is written at once.
   */
  private enqueue(entry: ReplyEntry): void {
    this.replies.push(entry);
    if (entry.reply !== null && this.replies.length === 1) this.flushHead();
  }

  /** Closes after every queued reply has been written (QUIT, protocol errors). */
  closeAfterReplies(): void {
    this.closeWhenFlushed = true;
    this.pauseReading();
    if (this.replies.length === 0) this.endSocket();
  }

  private onData(chunk: Buffer): void {
    if (this.closeWhenFlushed) return;
    this.framer.push(chunk);
    this.processFrames();
  }

  private processFrames(): void {
    const { maxPendingPerClient, maxQueryBytesPerClient } = this.ctx.config.limits;
    try {
      let frame: RequestFrame | null;
      while (this.replies.length < maxPendingPerClient && !this.closeWhenFlushed && (frame = this.framer.next()) !== null) {
        this.handle(frame);
      }
    } catch (err) {
      if (!(err instanceof ProtocolError)) throw err;
      this.ctx.metrics?.protocolErrors.inc();
      this.replyNow(encodeError(err.message.startsWith('Protocol error') ? `ERR ${err.message}` : err.message));
      this.closeAfterReplies();
      return;
    }
    if (this.framer.bufferedBytes > maxQueryBytesPerClient) {
      this.ctx.metrics?.protocolErrors.inc();
      this.replyNow(encodeError(`ERR respool: query buffer of ${this.framer.bufferedBytes} bytes exceeds the limit of ${maxQueryBytesPerClient}`));
      this.closeAfterReplies();
      return;
    }
    if (this.replies.length >= maxPendingPerClient) this.pauseReading();
  }

  private handle(frame: RequestFrame): void {
    const { args } = frame;
    const table = this.ctx.commands();
    const spec = table.lookup(args);
    const command = spec?.name ?? args[0]!.toString('latin1').toLowerCase();
    if (this.user === null && !AUTH_EXEMPT.has(command)) {
      this.replyNow(encodeError(ProxyError.noAuth()));
      return;
    }
    if (spec === undefined && isRespoolCommand(args[0]!)) {
      this.replyNow(runRespoolCommand(this.ctx.router.hotKeysControl, args, this.protocol));
      return;
    }
    const handling = spec ? proxyHandling(spec, args) : 'anyNode';
    switch (handling) {
      case 'local':
        this.replyNow(runLocalCommand(this, this.ctx, command, args));
        return;
      case 'exclusive':
        this.ctx.metrics?.commandErrorCounter(command, 'proxy').inc();
        this.replyNow(encodeError(ProxyError.needsDedicatedConnection(command.replace('|', ' '))));
        return;
      case 'allShards':
        if (this.ctx.isCluster() && spec !== undefined) {
          // Every shard answers; fan-out.ts merges the replies into this one entry.
          const entry = this.ctx.router.fanOut(this, frame.raw, args, spec, command);
          this.enqueue(Buffer.isBuffer(entry) ? { reply: entry } : entry);
          return;
        }
        break;
    }
    const result = this.ctx.router.forward(this, frame.raw, args, spec, table, command);
    this.enqueue(Buffer.isBuffer(result) ? { reply: result } : result);
  }

  private flushHead(): void {
    let head = this.replies.peek();
    while (head !== undefined && head.reply !== null) {
      this.replies.shift();
      if (!this.closed) this.write(head.reply);
      head = this.replies.peek();
    }
    if (this.replies.length === 0 && this.closeWhenFlushed) {
      this.endSocket();
      return;
    }
    this.maybeResumeReading();
  }

  /** Replies produced while handling one upstream chunk leave in one write (BatchedWriter). */
  private write(data: Buffer): void {
    this.writer.write(data);
    const unread = this.socket.writableLength + this.writer.pendingBytes;
    const max = this.ctx.config.clients.maxOutputBytesPerClient;
    if (unread > max) this.dropSlowClient(unread);
    else if (!this.outputPaused && unread > Math.min(max / 2, 4 * 1024 * 1024)) this.pauseForOutput();
  }

  private pauseForOutput(): void {
    this.outputPaused = true;
    this.pauseReading();
    // Still stalled after outputStallMs: the client is not reading; let it go (soft limit).
    const stall = setTimeout(() => {
      if (this.outputPaused) this.dropSlowClient(this.socket.writableLength + this.writer.pendingBytes);
    }, this.ctx.config.clients.outputStallMs);
    stall.unref();
    this.socket.once('drain', () => {
      clearTimeout(stall);
      this.outputPaused = false;
      this.maybeResumeReading();
    });
  }

  /** The client stopped reading its replies: disconnect it (its memory must stay bounded). */
  private dropSlowClient(unread: number): void {
    if (this.closed) return;
    const max = this.ctx.config.clients.maxOutputBytesPerClient;
    this.ctx.metrics?.raw.client_disconnects_total.labels('output_buffer').inc();
    this.ctx.log.warn({ client: this.address, unread, max }, ProxyError.outputBufferExceeded(unread, max));
    this.writer.discard();
    this.socket.destroy();
    this.onClose();
  }

  private onIdle(): void {
    if (this.closed || this.replies.length > 0) return; // waiting on upstream is not idleness
    this.ctx.metrics?.raw.client_disconnects_total.labels('idle_timeout').inc();
    this.destroy();
  }

  /**
   * Graceful drain (SIGTERM): read no more requests; close once every reply owed has been
   * written. The server destroys what is left at its drain deadline.
   */
  drain(): void {
    if (this.closed) return;
    this.closeAfterReplies();
  }

  /** Ends the connection now (drain deadline passed). */
  destroy(): void {
    if (this.closed) return;
    this.socket.destroy();
    this.onClose();
  }

  private endSocket(): void {
    this.writer.flush();
    this.socket.end();
  }

  private pauseReading(): void {
    if (this.readingPaused) return;
    this.readingPaused = true;
    this.socket.pause();
  }

  /** Reads again once neither bound holds it back: pending replies at half the limit, output drained. */
  private maybeResumeReading(): void {
    if (!this.readingPaused || this.outputPaused || this.closeWhenFlushed || this.closed) return;
    if (this.replies.length > this.ctx.config.limits.maxPendingPerClient / 2) return;
    this.readingPaused = false;
    this.socket.resume();
    this.processFrames(); // frames already buffered before the pause
  }

  private onClose(): void {
    if (this.closed) return;
    this.closed = true;
    this.ctx.onSessionClosed(this);
  }
}
