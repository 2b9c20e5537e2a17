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

/**
 * Why a request failed without a reply, when it is more than "the link went away":
 *  - 'timeout': it was written on a link whose oldest request waited past commandTimeoutMs;
 *  - 'shed': respool refused it because a bound was reached (queue full, node down past the
 *    queueing window); it was not written, and must not be retried either.
 */
export type LinkFailureCause = 'timeout' | 'shed';

/**
 * The connection a reply came on, as a LinkRequest sees it: a shared Link or a leased
 * DedicatedConnection (dedicated-connection.ts). Only what reply handling reads.
 */
export interface ReplySource {
  /** "host:port" of the upstream node. */
  readonly address: string;
}

/** Something waiting for one reply frame from a link (routing/upstream-call.ts UpstreamCall, a lease's requests, control-plane calls). */
export interface LinkRequest {
  /** Set by the link when the request is queued to be written (util/read-clock.ts: clockNow). */
  sentAt: number;
  /** The reply frame (a view into the link's read buffer: copy it to keep it past the call). */
  onReply(frame: Buffer, link: ReplySource): void;
  /**
   * The link failed before a reply came. `written` tells whether the request's bytes were handed
   * to the socket: if so the server may have run it, so it must not be re-sent blindly.
   * `cause` says when it was a timeout or a refusal (see LinkFailureCause); the router decides
   * by it, never by the error's text (which may quote an earlier failure).
   */
  onLinkFailure(error: string, written: boolean, cause?: LinkFailureCause): void;
}

/**
 * A request whose reply nobody reads (ASKING's, MULTI's or CLIENT CACHING's +OK, a SCRIPT LOAD
 * before a retry): a failure shows on the request written after it. A fresh one per write, as the
 * connection stamps each request's sentAt (a shared one would make its oldest entry look newer).
 */
export function ignoreReply(): LinkRequest {
  return { sentAt: 0, onReply() {}, onLinkFailure() {} };
}

export interface LinkOptions {
  host: string;
  port: number;
  protocol: 2 | 3;
  /** Replica links send READONLY so the replica serves reads of its slots. */
  readonly: boolean;
  /** The database the link serves (standalone upstreams): ≠ 0 sends SELECT in the handshake. */
  db?: number;
  auth: { username: string | null; password: string } | null;
  clientName: string;
  connectTimeoutMs: number;
  commandTimeoutMs: number;
  framerLimits?: Partial<FramerLimits>;
  /** Process-wide in-flight counters this link adds to (see ProcessLoad). */
  load?: ProcessLoad;
  /** config.upstreamTls: TLS to the node when enabled (upstream/dial.ts). */
  tls?: UpstreamTlsConfig | null;
  /** Before the handshake (UpstreamSocketOptions.prepare): a mirrored identity made sure on the node. */
  prepare?: () => Promise<void>;
  /** The node refused the handshake's credentials (WRONGPASS): a mirrored user may have been lost with a restart. */
  onAuthRefused?: () => void;
  /** A user's upstream identity: HELLO carries AUTH and SETNAME (handshake.ts), and no READONLY is sent. */
  identity?: boolean;
  /** How the socket is opened (upstream-socket.ts); the unit tests give a fake. */
  openSocket?: OpenUpstreamSocket;
  /**
   * How long the node may answer nothing while it runs a command that takes its time (SAVE …:
   * NodeHealth.busyWithLongCommand): timeouts.adminCommandMs then, else null (commandTimeoutMs).
   */
  patience?: () => number | null;
}

export type LinkState = 'connecting' | 'ready' | 'closed';

/**
 * One socket to one upstream node, pipelined.
 *
 *   waiting  : requests accepted before the handshake finished — not yet written, safe to retry
 *   inflight : requests written, oldest first; the n-th reply frame belongs to the n-th entry
 *   invariant: a reply frame always completes inflight.shift(); nothing else reads replies.
 *   reading  : the socket is always read, and each reply handed to its request at once — never
 *             held for a client that does not read (that client's output holds its own bytes,
 *             client-session.ts): one client's unread replies must not delay another's.
 *   If the oldest in-flight request waits longer than commandTimeoutMs for the node (since it
 *   was written, or since reply bytes last came), replies can no longer be trusted to arrive, so
 *   the whole link fails (every in-flight request gets a timeout error) and the pool replaces it.
 *
 * Events: 'ready', 'close' (reason: string).
 */
export class Link extends EventEmitter implements ReplySource {
  readonly address: string;
  state: LinkState = 'connecting';
  closeReason = '';
  /** True once the handshake completed (a link that closes before that was a failed connect). */
  wasReady = false;
  private readonly conn: UpstreamConnectionSocket;
  private readonly socket: net.Socket;
  private readonly writer: BatchedWriter;
  private readonly framer: ReplyFramer;
  private readonly waiting = new FifoQueue<{ data: Buffer; req: LinkRequest }>();
  private readonly inflight = new FifoQueue<LinkRequest>();
  /** Byte size of each in-flight request, parallel to `inflight` (numbers: no allocation). */
  private readonly inflightSizes = new FifoQueue<number>();
  /** Sum of inflightSizes: request bytes written and not yet answered. */
  inflightBytes = 0;
  /** True when the link failed because a reply did not come within commandTimeoutMs. */
  timedOut = false;
  /** When reply bytes last arrived (util/read-clock.ts clockNow): the oldest request waits for the node from then on. */
  private lastReplyAt = 0;
  /**
   * A link that carries a stream (MONITOR: respool's relay of scripts' commands) hands the frames
   * nobody asked for here, once its requests are answered; null: such a frame ends the link.
   */
  onStream: ((frame: Buffer) => void) | null = null;
  private timeoutTimer: NodeJS.Timeout | null = null;

  constructor(private readonly options: LinkOptions) {
    super();
    this.address = `${options.host}:${options.port}`;
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

  /** Bytes written to the link that the kernel has not taken yet (a congested socket). */
  get unsentBytes(): number {
    return this.writer.unsentBytes;
  }

  /** Bytes of a reply still arriving (buffered, not yet a whole frame). */
  get pendingReplyBytes(): number {
    return this.framer.bufferedBytes;
  }

  /** Requests written and not yet answered. */
  get inflightCount(): number {
    return this.inflight.length + this.waiting.length;
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
   * to `req` in order (NodePool.sendParts: a split command's parts for this node). The link
   * must be ready. `req` is queued once per request, so the n-th reply frame after the earlier
   * requests' is its n-th; its bytes count against the last of them.
   */
  sendMany(data: Buffer, req: LinkRequest, count: number): void {
    req.sentAt = clockNow();
    const size = data.length;
    for (let i = 1; i < count; i++) {
      this.inflight.push(req);
      this.inflightSizes.push(0);
    }
    this.inflight.push(req);
    this.inflightSizes.push(size);
    this.inflightBytes += size;
    const load = this.options.load;
    if (load !== undefined) {
      load.requests += count;
      load.bytes += size;
      load.sentBytes += size;
      load.sentRequests += count;
    }
    this.writer.write(data);
  }

  /**
   * Writes one request whose reply comes back on the stream (onStream), not through the FIFO: a
   * MONITOR connection's PING, whose reply marks a place in the node's stream
   * (client/script-line-relay.ts). Nothing is written unless the link is ready.
   */
  writeToStream(data: Buffer): void {
    if (this.state === 'ready') this.writer.write(data);
  }

  /** Control-plane helper: one command, its decoded-later reply frame (copied). */
  call(args: ReadonlyArray<string | Buffer | number>): Promise<Buffer> {
    return new Promise((resolve, reject) => {
      this.send(encodeCommand(args), {
        sentAt: 0,
        onReply: (frame) => resolve(Buffer.from(frame)),
        onLinkFailure: (error) => reject(new Error(error)),
      });
    });
  }

  close(reason = 'closed by respool'): void {
    this.fail(reason);
  }

  private writeNow(data: Buffer, req: LinkRequest): void {
    req.sentAt = clockNow();
    this.inflight.push(req);
    const size = data.length;
    this.inflightSizes.push(size);
    this.inflightBytes += size;
    if (DEV_CHECKS) invariant(this.inflightSizes.length === this.inflight.length, 'a link keeps one size per in-flight request');
    const load = this.options.load;
    if (load !== undefined) {
      load.requests++;
      load.bytes += size;
      load.sentBytes += size;
      load.sentRequests++;
    }
    this.writer.write(data);
  }

  /** Forgets the oldest in-flight request's size (its reply came or the link failed). */
  private settleOldest(): void {
    const size = this.inflightSizes.shift() ?? 0;
    this.inflightBytes -= size;
    const load = this.options.load;
    if (load !== undefined) {
      load.requests--;
      load.bytes -= size;
    }
  }

  private handshake(): void {
    const { auth, protocol, clientName, db, identity } = this.options;
    const steps = handshakeCommands(protocol, auth, clientName, db, identity === true);
    if (this.options.readonly) steps.push(['READONLY']);

    let remaining = steps.length;
    for (const step of steps) {
      this.writeNow(encodeCommand(step), {
        sentAt: 0,
        onReply: (frame) => {
          if (frame[0] === 0x2d /* - */) {
            const error = frame.toString('utf8', 1).trim();
            if (error.startsWith('WRONGPASS')) this.options.onAuthRefused?.();
            this.fail(`handshake ${String(step[0])} failed: ${error}`);
            return;
          }
          if (--remaining === 0) this.becomeReady();
        },
        onLinkFailure: () => {},
      });
    }
  }

  /** A reload changed timeouts.commandMs: the next timeout check uses it (the check interval stays). */
  setCommandTimeout(ms: number): void {
    this.options.commandTimeoutMs = ms;
  }

  private becomeReady(): void {
    if (this.state !== 'connecting') return;
    this.conn.connectDone();
    this.state = 'ready';
    this.wasReady = true;
    for (const { data, req } of this.waiting.drain()) this.writeNow(data, req);
    const tick = Math.max(50, Math.min(1000, Math.floor(this.options.commandTimeoutMs / 4)));
    this.timeoutTimer = setInterval(() => this.checkTimeout(), tick);
    this.timeoutTimer.unref();
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
    this.framer.push(chunk);
    this.lastReplyAt = clockNow(); // bytes came: the node is answering (a reply in progress counts too)
    let frame: Buffer | null;
    try {
      while ((frame = this.framer.next()) !== null) {
        if (frame[0] === 0x3e /* > push */) continue; // out-of-band; no shared-link feature subscribes
        const req = this.inflight.shift();
        if (req === undefined) {
          if (this.onStream !== null) {
            this.onStream(frame);
            continue;
          }
          this.fail('upstream sent a reply nobody asked for');
          return;
        }
        this.settleOldest();
        if (DEV_CHECKS) invariant(this.inflightSizes.length === this.inflight.length && this.inflightBytes >= 0, 'a reply settles exactly the oldest request');
        req.onReply(frame, this);
      }
    } catch (err) {
      this.fail(`unreadable reply from upstream: ${(err as Error).message}`);
    }
  }

  /**
   * The node owes the oldest request its reply from the later of its write and the last reply
   * bytes: a link that sends nothing for commandTimeoutMs is dead, one working through a long
   * queue (a thousand 1 MiB replies take seconds to arrive) is not.
   */
  private checkTimeout(): void {
    const oldest = this.inflight.peek();
    if (oldest === undefined) return;
    const silent = performance.now() - Math.max(oldest.sentAt, this.lastReplyAt);
    if (silent <= this.options.commandTimeoutMs) return;
    const patience = this.options.patience?.() ?? null;
    if (patience !== null && silent <= patience) return;
    const waited = patience ?? this.options.commandTimeoutMs;
    this.fail(ProxyError.timeout(this.address, waited), true);
  }

  /** Ends the link once and fails everything it holds; a timeout's message replaces the generic one. */
  private fail(reason: string, isTimeout = false): void {
    if (this.state === 'closed') return;
    this.state = 'closed';
    this.closeReason = reason;
    this.timedOut = isTimeout;
    while (this.inflightSizes.length > 0) this.settleOldest();
    if (this.timeoutTimer) clearInterval(this.timeoutTimer);
    this.writer.discard();
    const load = this.options.load;
    if (load !== undefined && load.writers.delete(this.writer)) load.closedWrites += this.writer.batches;
    this.conn.destroy();
    const inflightError = isTimeout ? reason : ProxyError.connectionLost(this.address);
    const cause = isTimeout ? 'timeout' : undefined;
    for (const req of this.inflight.drain()) req.onLinkFailure(inflightError, true, cause);
    const unsentError = ProxyError.upstreamUnavailable(this.address, reason);
    for (const { req } of this.waiting.drain()) req.onLinkFailure(unsentError, false);
    this.emit('close', reason);
  }
}
