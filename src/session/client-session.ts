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
    socket.setNoDelay(true);
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
    this.replies.push({ reply });
    if (this.replies.length === 1) this.flushHead();
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
        if (this.ctx.isCluster()) {
          this.ctx.metrics?.commandErrorCounter(command, 'proxy').inc();
          this.replyNow(encodeError(ProxyError.notSupportedInCluster(command.replace('|', ' '))));
          return;
        }
        break;
    }
    const result = this.ctx.router.forward(this, frame.raw, args, spec, table, command);
    if (Buffer.isBuffer(result)) this.replyNow(result);
    else {
      this.replies.push(result);
      if (result.reply !== null && this.replies.length === 1) this.flushHead();
    }
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
    if (this.readingPaused && !this.closeWhenFlushed && this.replies.length <= this.ctx.config.limits.maxPendingPerClient / 2) {
      this.resumeReading();
    }
  }

  /** Replies produced while handling one upstream chunk leave in one write (BatchedWriter). */
  private write(data: Buffer): void {
    this.writer.write(data);
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

  private resumeReading(): void {
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
