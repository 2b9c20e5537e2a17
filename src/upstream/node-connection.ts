import { EventEmitter } from 'node:events';
import type net from 'node:net';
import { performance } from 'node:perf_hooks';
import { ReplyFramer } from '../resp/reply-framer.js';
import type { FramerLimits } from '../resp/limits.js';
import { encodeCommand } from '../resp/encode.js';
import { handshakeCommands } from './handshake.js';
import { ProxyError } from '../errors.js';
import { FifoQueue } from '../util/fifo-queue.js';
import { BatchedWriter } from '../util/batched-writer.js';
import type { ProcessLoad } from './process-load.js';
import { openUpstreamSocket, type OpenUpstreamSocket, type UpstreamConnectionSocket } from './upstream-socket.js';
import { DEV_CHECKS, invariant } from '../util/dev-checks.js';
import { clockNow, holdClock, releaseClock } from '../util/read-clock.js';
import type { UpstreamTlsConfig } from '../config/tls-config.js';
import type { LinkFailureCause, LinkRequest, ReplySource } from './link-request.js';

/**
 * Why a connection closed, when a role needs more than its reason's text (closeCause):
 *  - 'timeout': the oldest in-flight request waited past its bound (the deadline, or a role's
 *    own check: link.ts);
 *  - 'handshake-refused': the node answered a handshake step with an error (handshakeRefusal
 *    holds its error line).
 * Roles decide by it, never by closeReason's text.
 */
export type CloseCause = 'timeout' | 'handshake-refused';

export type LinkState = 'connecting' | 'ready' | 'closed';

/** What every connection to a node is opened with (its role adds its own). */
export interface NodeConnectionOptions {
  host: string;
  port: number;
  protocol: 2 | 3;
  auth: { username: string | null; password: string } | null;
  /** CLIENT SETNAME on the node (CLIENT LIST shows it). */
  clientName: string;
  /** The database it opens in (SELECT in the handshake when ≠ 0); default 0. */
  db?: number;
  /** A user's upstream identity: HELLO carries AUTH and SETNAME (handshake.ts). */
  identity?: boolean;
  connectTimeoutMs: number;
  framerLimits?: Partial<FramerLimits>;
  /** config.upstreamTls: TLS to the node when enabled (upstream/dial.ts). */
  tls?: UpstreamTlsConfig | null;
  /** Before the handshake (UpstreamSocketOptions.prepare): a mirrored identity made sure on the node. */
  prepare?: () => Promise<void>;
  /** The node refused the handshake's credentials (WRONGPASS): a mirrored user may have been lost with a restart. */
  onAuthRefused?: () => void;
  /** Process-wide in-flight counters this connection adds to (see ProcessLoad). */
  load?: ProcessLoad;
  /** How the socket is opened (upstream-socket.ts); the unit tests give a fake. */
  openSocket?: OpenUpstreamSocket;
}

/** One command of the handshake and what its reply sets (an error reply fails the connection before). */
export interface HandshakeStep {
  args: ReadonlyArray<string>;
  onReply?(frame: Buffer): void;
}

/**
 * One socket to one upstream node, pipelined: the core every role shares — shared links
 * (link.ts), leased connections (leased-connection.ts), subscriber connections
 * (pubsub/subscriber-connection.ts), replication feeds (replication-feed.ts). A role adds its
 * policy (when the node is too slow, what its handshake learns, which push answers a request,
 * bytes that are not RESP frames: a snapshot read raw) through the protected hooks, never its
 * own FIFO.
 *
 *   handshake: the role's steps (handshakeCommands, then READONLY / CLIENT ID …) written at once,
 *              each an ordinary request at the head of `inflight`; an error reply fails the
 *              connection; the last reply makes it ready
 *   waiting  : requests accepted before the handshake finished — not yet written, safe to retry
 *   inflight : requests written, oldest first; the n-th reply frame belongs to the n-th entry;
 *              `sizes` holds each one's byte size in parallel (numbers: no allocation)
 *   invariant: a reply frame always completes inflight.shift(); nothing else reads replies.
 *              Push frames ('>') are out of band (onPush, or dropped) — but for a request
 *              answered by pushes (pushReplies: a subscriber's SUBSCRIBE), which the role
 *              matches (answers) and which leaves the FIFO with its last one. Frames that
 *              answer no request are a stream's (onStream: MONITOR), or end the connection.
 *   reading  : the socket is always read, and each reply handed to its request at once — never
 *              held for a client that does not read (that client's output holds its own bytes,
 *              client-session.ts): one client's unread replies must not delay another's.
 *   deadline : null = none. While set, if the oldest in-flight request has waited longer than
 *              it, the whole connection fails: every in-flight request gets ProxyError.timeout
 *              (written, cause 'timeout'), waiting ones upstreamUnavailable (not written), and
 *              the socket closes — later frames could no longer be matched.
 *   fail     : once; every request still held fails (written or not, as above), then the
 *              role's onClosed, then 'close'. closeCause says why when a role must know
 *              (a timeout, a refused handshake), never the reason's text.
 *
 * Events: 'ready', 'close' (reason: string).
 */
export class NodeConnection extends EventEmitter implements ReplySource {
  readonly host: string;
  readonly port: number;
  readonly protocol: 2 | 3;
  /** "host:port" */
  readonly address: string;
  state: LinkState = 'connecting';
  closeReason = '';
  /** True once the handshake completed (a connection that closes before that was a failed dial). */
  wasReady = false;
  /** Why it closed, when more than "it went away" (see CloseCause); null while open, or for any other end. */
  closeCause: CloseCause | null = null;
  /** closeCause 'handshake-refused': the node's error line (without '-' and CRLF); else null. */
  handshakeRefusal: string | null = null;
  /** Sum of the in-flight requests' sizes: request bytes written and not yet answered. */
  inflightBytes = 0;
  /** RESP3 push frames (a view into the read buffer: copy to keep). Unset: pushes are dropped. */
  onPush: ((frame: Buffer) => void) | null = null;
  /**
   * Frames that answer no request, once every request is answered (MONITOR's stream after its
   * +OK: respool's relay of scripts' commands). Unset: such a frame ends the connection.
   */
  onStream: ((frame: Buffer) => void) | null = null;
  /** Resolves when ready; rejects with the close reason if the connection closes before. */
  readonly opened: Promise<void>;
  /** When a request was last written (util/read-clock.ts clockNow): a role's idle check (a subscriber's PING). */
  protected lastWriteAt = 0;
  /** When reply bytes last arrived (util/read-clock.ts clockNow): a role's silence check (link.ts) counts from here. */
  protected lastBytesAt = 0;

  protected readonly conn: UpstreamConnectionSocket;
  protected readonly socket: net.Socket;
  protected readonly writer: BatchedWriter;
  protected readonly framer: ReplyFramer;
  protected readonly waiting = new FifoQueue<{ data: Buffer; req: LinkRequest }>();
  protected readonly inflight = new FifoQueue<LinkRequest>();
  /** Byte size of each in-flight request, parallel to `inflight`. */
  private readonly sizes = new FifoQueue<number>();
  /** Handshake requests still at the head of `inflight` (not the callers'). */
  private handshakeLeft = 0;
  /** Called when a reply left nothing in flight or waiting on a ready connection (a lease's 'settled'). */
  protected onSettled: (() => void) | null = null;
  private deadlineMs: number | null = null;
  private deadlineTimer: NodeJS.Timeout | null = null;
  private resolveOpened!: () => void;
  private rejectOpened!: (err: Error) => void;

  constructor(protected readonly options: NodeConnectionOptions) {
    super();
    this.host = options.host;
    this.port = options.port;
    this.protocol = options.protocol;
    this.address = `${options.host}:${options.port}`;
    this.opened = new Promise<void>((resolve, reject) => {
      this.resolveOpened = resolve;
      this.rejectOpened = reject;
    });
    this.opened.catch(() => {}); // observed through state/closeReason as well; never unhandled
    this.framer = new ReplyFramer(options.framerLimits);
    this.conn = (options.openSocket ?? openUpstreamSocket)(options, {
      open: () => this.handshake(),
      data: (chunk) => this.onData(chunk),
      fail: (reason) => this.fail(reason),
    });
    this.socket = this.conn.socket;
    this.writer = new BatchedWriter(this.socket, 'immediate');
    options.load?.writers.add(this.writer);
  }

  /** Callers' requests sent and not yet answered (written, or waiting for the handshake). */
  get inflightCount(): number {
    return this.inflight.length - this.handshakeLeft + this.waiting.length;
  }

  /**
   * This connection's own address as the node shows it in MONITOR and CLIENT LIST ("127.0.0.1:53422",
   * "[::1]:53422": Valkey's formatting); '' while unknown (client/script-commands.ts matches a
   * script's MONITOR line to the call that sent it by it).
   */
  get localEndpoint(): string {
    const ip = this.socket.localAddress;
    const port = this.socket.localPort;
    if (ip === undefined || port === undefined) return '';
    return ip.includes(':') ? `[${ip}]:${port}` : `${ip}:${port}`;
  }

  /** Bytes written to the connection that the kernel has not taken yet (a congested socket). */
  get unsentBytes(): number {
    return this.writer.unsentBytes;
  }

  /** Bytes of a reply still arriving (buffered, not yet a whole frame). */
  get pendingReplyBytes(): number {
    return this.framer.bufferedBytes;
  }

  /** True when the connection failed because a reply did not come within its bound. */
  get timedOut(): boolean {
    return this.closeCause === 'timeout';
  }

  /** The current deadline in ms, or null. */
  get deadline(): number | null {
    return this.deadlineMs;
  }

  /**
   * Queues `data` (exactly one complete RESP request; its one reply goes to `req`). Before the
   * handshake completes it waits; after close it fails at once, marked as not written.
   */
  send(data: Buffer, req: LinkRequest): void {
    if (this.state === 'ready') {
      this.writeNow(data, req);
    } else if (this.state === 'connecting') {
      this.waiting.push({ data, req });
    } else {
      req.onLinkFailure(ProxyError.upstreamUnavailable(this.address, this.closeReason), false);
    }
  }

  /**
   * Writes `count` complete requests laid out one after the other in `data`, every reply going
   * to `req` in order (NodePool.sendParts: a split command's parts for this node). The
   * connection must be ready. `req` is queued once per request, so the n-th reply frame after
   * the earlier requests' is its n-th; its bytes count against the last of them.
   */
  sendMany(data: Buffer, req: LinkRequest, count: number): void {
    req.sentAt = clockNow();
    const size = data.length;
    for (let i = 1; i < count; i++) {
      this.inflight.push(req);
      this.sizes.push(0);
    }
    this.inflight.push(req);
    this.sizes.push(size);
    this.inflightBytes += size;
    const load = this.options.load;
    if (load !== undefined) {
      load.requests += count;
      load.bytes += size;
      load.sentBytes += size;
      load.sentRequests += count;
    }
    this.writer.write(data);
    if (this.deadlineMs !== null && this.deadlineTimer === null) this.armDeadline();
  }

  /**
   * Writes one request whose reply comes back on the stream (onStream), not through the FIFO: a
   * MONITOR connection's PING, whose reply marks a place in the node's stream
   * (client/script-line-relay.ts). Nothing is written unless the connection is ready.
   */
  writeToStream(data: Buffer): void {
    if (this.state === 'ready') this.writer.write(data);
  }

  /** Control-plane helper: one command, its reply frame (copied). Error replies resolve too. */
  call(args: ReadonlyArray<string | Buffer | number>): Promise<Buffer> {
    return new Promise((resolve, reject) => {
      this.send(encodeCommand(args), {
        sentAt: 0,
        onReply: (frame) => resolve(Buffer.from(frame)),
        onLinkFailure: (error) => reject(new Error(error)),
      });
    });
  }

  /**
   * How long the oldest in-flight request may wait for its reply, in ms; null = for ever (the
   * default). Measured from when each request was written, so setting it while a request
   * already waits counts the time it has waited.
   */
  setDeadline(ms: number | null): void {
    this.deadlineMs = ms;
    this.armDeadline();
  }

  close(reason = 'closed by respool'): void {
    this.fail(reason);
  }

  /** The handshake: what every connection sends (handshake.ts); a role adds its steps after these. */
  protected handshakeSteps(): HandshakeStep[] {
    const { auth, protocol, clientName, db, identity } = this.options;
    return handshakeCommands(protocol, auth, clientName, db ?? 0, identity === true).map((args) => ({ args }));
  }

  /** Ready: the role's own start (a timer, …), before 'ready' is emitted. */
  protected onReady(): void {}

  /** Closing: the role's own end (its timers), before the requests it held are failed. */
  protected onClosing(): void {}

  /**
   * Closed: the role's own end once every request it held was failed (and `opened` rejected),
   * before 'close' is emitted — what it tells its owner (closeReason, closeCause are set).
   */
  protected onClosed(_reason: string): void {}

  /** Whether `push` answers `head` (a request with pushReplies left): the role's rule. */
  protected answers(_head: LinkRequest, _push: Buffer): boolean {
    return false;
  }

  /** Every frame of one read was handled (a subscriber hands on the run of messages it gathered). */
  protected onChunkDone(): void {}

  /**
   * While set, what arrives is not RESP frames and goes here as it comes (a replica's snapshot:
   * replication-feed.ts); the role hands the bytes after it back with readFrames.
   */
  protected rawReader: ((chunk: Buffer) => void) | null = null;

  private writeNow(data: Buffer, req: LinkRequest): void {
    req.sentAt = this.lastWriteAt = clockNow();
    this.inflight.push(req);
    const size = data.length;
    this.sizes.push(size);
    this.inflightBytes += size;
    if (DEV_CHECKS) invariant(this.sizes.length === this.inflight.length, 'a connection keeps one size per in-flight request');
    const load = this.options.load;
    if (load !== undefined) {
      load.requests++;
      load.bytes += size;
      load.sentBytes += size;
      load.sentRequests++;
    }
    this.writer.write(data);
    if (this.deadlineMs !== null && this.deadlineTimer === null) this.armDeadline();
  }

  /** Forgets the oldest in-flight request's size (its reply came or the connection failed). */
  private settleOldest(): void {
    const size = this.sizes.shift() ?? 0;
    this.inflightBytes -= size;
    const load = this.options.load;
    if (load !== undefined) {
      load.requests--;
      load.bytes -= size;
    }
  }

  private handshake(): void {
    const steps = this.handshakeSteps();
    this.handshakeLeft = steps.length;
    for (const step of steps) {
      this.writeNow(encodeCommand(step.args), {
        sentAt: 0,
        onReply: (frame) => {
          this.handshakeLeft--;
          if (frame[0] === 0x2d /* - */) {
            const error = frame.toString('utf8', 1).trim();
            if (error.startsWith('WRONGPASS')) this.options.onAuthRefused?.();
            this.handshakeRefusal = error;
            this.end(`handshake ${step.args[0]} failed: ${error}`, 'handshake-refused');
            return;
          }
          step.onReply?.(frame);
          if (this.handshakeLeft === 0) this.becomeReady();
        },
        onLinkFailure: () => {},
      });
    }
  }

  private becomeReady(): void {
    if (this.state !== 'connecting') return;
    this.conn.connectDone();
    this.state = 'ready';
    this.wasReady = true;
    for (const { data, req } of this.waiting.drain()) this.writeNow(data, req);
    this.onReady();
    this.resolveOpened();
    this.emit('ready');
  }

  private onData(chunk: Buffer): void {
    holdClock(); // every reply in this chunk arrived now (util/read-clock.ts)
    try {
      this.readChunk(chunk);
    } finally {
      releaseClock();
    }
  }

  private readChunk(chunk: Buffer): void {
    const load = this.options.load;
    if (load !== undefined) {
      load.receivedBytes += chunk.length;
      load.reads++;
    }
    this.lastBytesAt = clockNow(); // bytes came: the node is answering (a reply in progress counts too)
    const raw = this.rawReader;
    if (raw !== null) return raw(chunk);
    this.readFrames(chunk);
  }

  /** Frames `chunk` (with what came before it) and hands each frame on: see the class comment. */
  protected readFrames(chunk: Buffer): void {
    this.framer.push(chunk);
    let frame: Buffer | null;
    try {
      while ((frame = this.framer.next()) !== null) {
        if (frame[0] === 0x3e /* > push */) {
          const head = this.inflight.peek();
          if (head !== undefined && head.pushReplies !== undefined && head.pushReplies > 0 && this.answers(head, frame)) {
            if (--head.pushReplies === 0) {
              this.inflight.shift();
              this.settleOldest();
            }
            head.onReply(frame, this);
            if (this.state === 'closed') return;
            continue;
          }
          const onPush = this.onPush;
          if (onPush === null) continue;
          onPush(frame);
          if (this.state === 'closed') return;
          continue;
        }
        const req = this.inflight.shift();
        if (req === undefined) {
          const onStream = this.onStream;
          if (onStream === null) return this.fail('upstream sent a reply nobody asked for');
          onStream(frame);
          if (this.state === 'closed') return;
          continue;
        }
        this.settleOldest();
        if (DEV_CHECKS) invariant(this.sizes.length === this.inflight.length && this.inflightBytes >= 0, 'a reply settles exactly the oldest request');
        req.onReply(frame, this);
        if (this.state === 'closed') return;
        if (this.onSettled !== null && this.inflight.length === 0 && this.waiting.length === 0 && this.state === 'ready') this.onSettled();
      }
      this.onChunkDone();
    } catch (err) {
      this.fail(`unreadable reply from upstream: ${(err as Error).message}`);
    }
  }

  /** (Re)arms the one deadline timer for the oldest in-flight request, if a deadline is set. */
  private armDeadline(): void {
    if (this.deadlineTimer !== null) {
      clearTimeout(this.deadlineTimer);
      this.deadlineTimer = null;
    }
    if (this.deadlineMs === null || this.state === 'closed') return;
    const oldest = this.inflight.peek();
    if (oldest === undefined) return;
    const due = Math.max(0, oldest.sentAt + this.deadlineMs - performance.now());
    this.deadlineTimer = setTimeout(() => this.checkDeadline(), Math.ceil(due));
  }

  private checkDeadline(): void {
    this.deadlineTimer = null;
    const ms = this.deadlineMs;
    const oldest = this.inflight.peek();
    if (ms === null || oldest === undefined || this.state === 'closed') return;
    if (performance.now() - oldest.sentAt >= ms) {
      this.fail(ProxyError.timeout(this.address, ms), true);
    } else {
      this.armDeadline(); // the oldest was answered meanwhile: watch the new oldest
    }
  }

  /** Ends the connection once and fails everything it holds; a timeout's message replaces the generic one. */
  protected fail(reason: string, isTimeout = false): void {
    this.end(reason, isTimeout ? 'timeout' : null);
  }

  /** fail, with its cause (closeCause): the one way a connection ends. */
  private end(reason: string, cause: CloseCause | null): void {
    if (this.state === 'closed') return;
    const wasConnecting = this.state === 'connecting';
    const isTimeout = cause === 'timeout';
    this.state = 'closed';
    this.closeReason = reason;
    this.closeCause = cause;
    while (this.sizes.length > 0) this.settleOldest();
    if (this.deadlineTimer !== null) clearTimeout(this.deadlineTimer);
    this.deadlineTimer = null;
    this.onClosing();
    this.writer.discard();
    const load = this.options.load;
    if (load !== undefined && load.writers.delete(this.writer)) load.closedWrites += this.writer.batches;
    this.conn.destroy();
    // Handshake requests are the connection's own: their failure tells nobody.
    const inflightError = isTimeout ? reason : ProxyError.connectionLost(this.address);
    const failure = isTimeout ? 'timeout' : undefined;
    for (const req of this.inflight.drain()) req.onLinkFailure(inflightError, true, failure);
    this.handshakeLeft = 0;
    const unsentError = ProxyError.upstreamUnavailable(this.address, reason);
    for (const { req } of this.waiting.drain()) req.onLinkFailure(unsentError, false);
    if (wasConnecting) this.rejectOpened(new Error(unsentError));
    this.onClosed(reason);
    this.emit('close', reason);
  }
}
