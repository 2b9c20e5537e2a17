import type { Socket } from 'node:net';
import { RequestFramer, RequestFrame } from '../resp/request-framer.js';
import { ProtocolError } from '../resp/protocol-error.js';
import { encodeError } from '../resp/encode.js';
import { ProxyError } from '../errors.js';
import { dispatch } from '../handlers/index.js';
import type { CommandFamily } from '../commands/proxy-handling.js';
import type { ClientBuffers, DispatchedSession } from '../client/handler-session.js';
import type { ServerContext } from '../client/server-context.js';
import { BatchedWriter } from '../util/batched-writer.js';
import { FifoQueue } from '../util/fifo-queue.js';
import { ReplyEntry, ReplyQueue } from '../client/reply-queue.js';
import { ClientState } from '../client/client-state.js';
import type { UpstreamIdentity } from '../acl/upstream-identity.js';
import { readClientSocket } from './shared-reads.js';
import { holdClock, releaseClock } from '../util/read-clock.js';
import type { AdmittedClient } from '../client/fair-admission.js';
import type { ReplyNames } from '../keys/reply-names.js';
import { laneClass, type LaneClass } from '../client/lane-class.js';
import { HOLDER_BYTES, type MemoryHolder } from '../client/memory-ceiling.js';
import { moveClient, type Tenant } from '../tenants/tenant.js';
import type { TenantJoin } from '../client/handler-session.js';

/**
 * What a session costs before and between requests (a connection storm, idle clients): one
 * object per part (state, framer, reply queue, writer), no closures per session — the socket's
 * listeners are shared functions that find the session under SESSION on the socket — one framer
 * limits object shared by all (resp/limits.ts), the pushes' size queue made on the first push queued behind replies.
 */
const SESSION = Symbol('respool.session');
type SessionSocket = Socket & { [SESSION]: ClientSession };

/** The bytes of a request's arguments (Valkey's argv_len_sum). */
function argvBytesOf(frame: RequestFrame): number {
  let n = 0;
  for (const a of frame.args) n += a.length;
  return n;
}

/**
 * How far ahead of its turn a client's socket is read: past this many request bytes waiting to be
 * handed on (a deep pipeline), reading stops until half of it went (TCP back-pressure holds the
 * rest in the client's socket, as Valkey's 16 KiB reads do). A request still arriving is read on.
 */
const READ_AHEAD_BYTES = 256 * 1024;
/** Replies a client may owe before its first reply was written (ClientSession.window). */
const COLD_WINDOW = 4;

/** 'close' follows an error; a client's reset is not respool's error. */
function ignoreSocketError(): void {}

/**
 * One client connection: frames its requests, hands each to dispatch (handlers/index.ts: admission,
 * then its family's handler), and writes replies back strictly in request order (reply-queue.ts).
 * What it decides is the order: which request is handed on next, and when.
 *
 *   replies  : one entry per request, in the order the requests arrived (ReplyQueue)
 *   turns    : requests are handed on one slice at a time, the rest when the client's turn comes
 *             again (client/fair-admission.ts), while the client owes fewer replies than its
 *             window (admission.maxInflightPerClient, and its share of reply bytes); requests not
 *             handed on wait in the framer (its own buffer), read at most READ_AHEAD_BYTES ahead
 *   lane     : which of a node's links its requests take when placed afresh (client/lane-class.ts)
 *   barrier  : while a handler runs exclusively (a leased connection: WATCH, blocking commands),
 *             no later request is handled until the replies before and of it are written
 *   bound    : at most limits.maxPendingPerClient entries; at the bound the session stops
 *             reading the socket (TCP backpressure reaches the client) until half have drained.
 *   output   : replies written but not yet read by the client (socket buffer) stay under
 *             clients.maxOutputBytesPerClient; past it the client is disconnected (like Valkey's
 *             client-output-buffer-limit), so a client that stops reading cannot hold memory.
 *             Past half of it (at most 4 MiB) the session stops reading that client's requests
 *             and hands none on until the socket drains: a slow reader adds no work to the shared
 *             links and holds only its own bytes (never a link: the links are always read, its
 *             replies come to its output as they arrive); if it does not drain within
 *             clients.outputStallMs, the client is disconnected too. Across all clients,
 *             limits.maxMemory disconnects the ones holding the most (client/memory-ceiling.ts).
 *   idle     : clients.idleTimeoutMs without traffic and nothing pending closes the connection.
 *   close    : a client that closes its side with nothing owed is closed at once (onEnd).
 */
export class ClientSession implements DispatchedSession, AdmittedClient, MemoryHolder {
  readonly id: number;
  readonly state: ClientState;
  closed = false;
  readonly createdAt = Date.now();
  /** Its place on every node's links (NodePool.placeFor); -1 until its first request upstream. */
  linkPlace = -1;
  /** Waiting in the admission ring for its next slice (fair-admission.ts), and since when. */
  waitingTurn = false;
  waitingSince = 0;

  private readonly framer: RequestFramer;
  private readonly replies = new ReplyQueue();
  /** Requests are held back while a lane switch waits for earlier replies (runExclusive). */
  private barrier = false;
  private exclusiveStart: (() => void) | null = null;
  private closeHooks: Array<() => void> | null = null;
  private readingPaused = false;
  /** Reading paused because the client is not reading its replies (see `output` above). */
  private outputPaused = false;
  /** Reading paused because READ_AHEAD_BYTES of requests wait for their turn (see `turns` above). */
  private backlogged = false;
  /** Replies written so far and their running average size (the byte window, the lane). */
  private repliesWritten = 0;
  private replyAverage = 0;
  private closeWhenFlushed = false;
  private readonly writer: BatchedWriter;
  /** Sizes of the pub/sub pushes queued behind owed replies, oldest first, and their sum (see push()); made on first use. */
  private queuedPushSizes: FifoQueue<number> | null = null;
  /** The request CLIENT PAUSE holds back (copied), until the pause ends; reading stops meanwhile. */
  private held: RequestFrame | null = null;
  private queuedPushBytes = 0;
  /** The request being handled now, and the argument bytes of the last blocking one (argv-mem while it is blocked; a number, so no read slab stays pinned). */
  private handling: RequestFrame | null = null;
  private blockingArgvBytes = 0;
  /** Bytes read from the client and bytes of replies handed to the writer (CLIENT LIST tot-net-in / tot-net-out). */
  private bytesIn = 0;
  private bytesOut = 0;

  /** The client's socket: the accepted one, or its re-wrap reading through the shared buffer (shared-reads.ts). */
  readonly socket: Socket;

  constructor(
    accepted: Socket,
    /** The proxy as this client sees it: its tenant's upstreams (contextOf; it changes when its user's tenant does). */
    public ctx: ServerContext,
  ) {
    const socket = readClientSocket(accepted, ClientSession.onSocketData);
    this.socket = socket;
    this.id = ctx.nextClientId();
    this.state = new ClientState(ctx.users); // respool's users (src/acl/user-directory.ts)
    this.framer = new RequestFramer(ctx.config.limits); // its bulk, array and inline bounds (one shared limits object: resp/limits.ts)
    // TCP_NODELAY and keepalive: from the listening socket, or set on accept (session/socket-options.ts).
    const { idleTimeoutMs } = ctx.config.clients;
    (socket as SessionSocket)[SESSION] = this;
    if (idleTimeoutMs > 0) {
      socket.setTimeout(idleTimeoutMs);
      socket.on('timeout', ClientSession.onSocketTimeout);
    }
    this.writer = new BatchedWriter(socket, 'microtask');
    this.replies.observer = ctx.observer ?? null; // slow log, per-command latency (observe/request-observer.ts)
    socket.on('end', ClientSession.onSocketEnd);
    socket.on('close', ClientSession.onSocketClose);
    socket.on('error', ignoreSocketError);
    // A client starts as the default user: one of that user's tenant's clients, if it has room.
    const tenant = ctx.tenants.of(this.state.user);
    if (tenant !== null && this.joinTenant(tenant, true) !== 'joined') {
      this.replyNow(encodeError(ProxyError.tenantMaxClients(tenant.name, tenant.maxClients)));
      this.closeAfterReplies();
    }
  }

  // The socket's listeners (`this` is the socket), shared by every session.
  private static onSocketData(this: Socket, chunk: Buffer): void {
    (this as SessionSocket)[SESSION].onData(chunk);
  }

  private static onSocketEnd(this: Socket): void {
    (this as SessionSocket)[SESSION].onEnd();
  }

  private static onSocketClose(this: Socket): void {
    (this as SessionSocket)[SESSION].handleClose();
  }

  private static onSocketTimeout(this: Socket): void {
    (this as SessionSocket)[SESSION].onIdle();
  }

  get pending(): number {
    return this.replies.length;
  }

  /** The lane of its next placement on a node's links (client/lane-class.ts). */
  get laneClass(): LaneClass {
    return laneClass(this.framer.bufferedBytes, this.ctx.config.admission.sliceBytes, this.repliesWritten, this.replyAverage, this.outputPaused);
  }

  /** NodePool.placeFor: its requests go on the node's bulk links. */
  get bulk(): boolean {
    return this.laneClass === 'bulk';
  }

  /** Its turn came (fair-admission.ts): one more slice. */
  takeTurn(): void {
    if (!this.closed) this.processFrames();
  }

  get address(): string {
    // A Unix socket client has no address: Valkey shows the socket's path and port 0.
    if (this.socket.remoteAddress === undefined) return `${this.ctx.config.unixSocket ?? ''}:0`;
    return `${this.socket.remoteAddress}:${this.socket.remotePort}`;
  }

  get localAddress(): string {
    if (this.socket.localAddress === undefined) return `${this.ctx.config.unixSocket ?? ''}:0`;
    return `${this.socket.localAddress}:${this.socket.localPort}`;
  }

  get protocol(): 2 | 3 {
    return this.state.protocol;
  }

  get db(): number {
    return this.state.db;
  }

  /** Who its commands run as on the nodes (null: respool's own upstreamAuth): its user's identity, read at each call. */
  get identity(): UpstreamIdentity | null {
    return this.state.acl.upstream;
  }

  /** Entries report here when filled; the head (and what is done behind it) is written. */
  onEntryDone(entry: ReplyEntry): void {
    if (this.closed) return; // nobody to write it to: not even copied
    if (this.replies.isHead(entry)) {
      this.flushHead();
    } else if (entry.reply !== null) {
      this.replies.keep(entry);
      this.ctx.memory?.grew(this);
    }
  }

  reserve(pushing = false): ReplyEntry {
    const entry = new ReplyEntry(this);
    if (!pushing && this.state.repliesSuppressed) entry.silent = true;
    this.replies.push(entry);
    return entry;
  }

  replyNow(reply: Buffer, pushing = false): void {
    const entry = new ReplyEntry(this, reply);
    if (!pushing && this.state.repliesSuppressed) entry.silent = true;
    this.replies.push(entry);
    if (this.replies.length === 1) this.flushHead();
  }

  /**
   * A pub/sub push (one or more messages, or a confirmation respool sends on its own): written
   * now when no reply is owed — straight to the kernel unless replies of this turn are still
   * batched before it — else queued behind every reply owed (copied: the frame is a view into a
   * subscriber connection's read buffer). Bounded like Valkey's client-output-buffer-limit
   * pubsub: unread bytes (socket + batch + pushes still queued) past
   * pubsub.maxOutputBytesPerClient disconnect this client at once — no waiting, no timer, so
   * one slow subscriber never delays the others the hub is delivering to.
   *
   * Queued pushes are tracked by size only: entries leave the queue oldest first, so at most
   * `replies.length` of them can still be in it; older ones are forgotten (an upper bound on
   * what is still held; exact when the queue holds pushes behind one owed reply).
   */
  push(frame: Buffer): void {
    if (this.closed || this.closeWhenFlushed) return; // QUIT, drain: nothing after the last reply
    if (this.replies.length === 0) {
      if (this.queuedPushBytes > 0) {
        this.queuedPushSizes!.drain();
        this.queuedPushBytes = 0;
      }
      this.write(frame, true); // now, not at the end of the fan-out loop (BatchedWriter.writeNow)
      if (this.closed) return; // past clients.maxOutputBytesPerClient: already dropped
    } else {
      const sizes = (this.queuedPushSizes ??= new FifoQueue<number>());
      while (sizes.length >= this.replies.length) this.queuedPushBytes -= sizes.shift()!;
      this.replies.push(new ReplyEntry(this, Buffer.from(frame)));
      sizes.push(frame.length);
      this.queuedPushBytes += frame.length;
    }
    const unread = this.unreadOutputBytes();
    const max = this.ctx.config.pubsub.maxOutputBytesPerClient;
    if (unread <= max) return;
    this.ctx.metrics?.raw.client_disconnects_total.labels('pubsub_output').inc();
    this.ctx.log.warn({ client: this.address, unread, max, limit: 'pubsub.maxOutputBytesPerClient' }, ProxyError.outputBufferExceeded(unread, max));
    this.writer.discard();
    this.socket.destroy();
    this.handleClose();
  }

  unreadOutputBytes(): number {
    return this.writer.unsentBytes + this.queuedPushBytes;
  }

  /** Replies respool holds for it: not yet taken by the kernel, or finished and waiting in its queue (limits.maxMemory, CLIENT LIST omem). */
  outputBytes(): number {
    return this.writer.unsentBytes + this.replies.heldBytes;
  }

  /** Replies owed and not come yet, at its average reply size: they land in its output whether it reads or not. */
  comingBytes(): number {
    return (this.replies.length - this.replies.heldCount) * this.replyAverage;
  }

  /** Request bytes read and not handed on yet (CLIENT LIST qbuf). */
  queryBytes(): number {
    return this.framer.bufferedBytes;
  }

  /** Among the clients holding the most when respool's buffers passed limits.maxMemory (memory-ceiling.ts): closed now, its replies dropped. */
  dropForMemory(): void {
    if (this.closed) return;
    this.ctx.metrics?.raw.client_disconnects_total.labels('max_memory').inc();
    this.writer.discard();
    this.socket.destroy();
    this.handleClose();
  }

  whenOutputBelow(bytes: number, fn: () => void): void {
    const check = (): void => {
      if (this.closed) return;
      if (this.unreadOutputBytes() <= bytes) return fn();
      this.writer.whenSent(check);
    };
    check();
  }

  runExclusive(start: () => void): void {
    this.barrier = true;
    this.exclusiveStart = start;
    if (this.replies.length === 0) this.startExclusive();
  }

  onClose(fn: () => void): void {
    (this.closeHooks ??= []).push(fn);
  }

  private startExclusive(): void {
    const start = this.exclusiveStart!;
    this.exclusiveStart = null;
    start();
    if (this.replies.length === 0) this.liftBarrier();
  }

  private liftBarrier(): void {
    this.barrier = false;
    this.processFrames();
    this.maybeResumeReading();
  }

  /** Closes after every queued reply has been written (QUIT, protocol errors). */
  closeAfterReplies(): void {
    this.closeWhenFlushed = true;
    this.pauseReading();
    if (this.replies.length === 0) this.endSocket();
  }

  private onData(chunk: Buffer): void {
    if (this.closeWhenFlushed) return;
    this.state.lastInteraction = holdClock(); // CLIENT LIST idle (once per chunk); client latency start
    try {
      this.bytesIn += chunk.length;
      if (this.ctx.metrics !== undefined) this.ctx.metrics.traffic.clientIn += chunk.length;
      this.framer.push(chunk);
      // Waiting for its turn: its first slice of this turn was handed on already.
      if (this.waitingTurn) this.checkQueryBytes();
      else this.processFrames();
    } finally {
      releaseClock();
    }
  }

  /**
   * Hands this client's requests to dispatch: one slice (admission.sliceRequests / sliceBytes), while
   * its window allows; what is left waits for its next turn (fair-admission.ts) or its replies.
   */
  private processFrames(): void {
    const { sliceRequests, sliceBytes } = this.ctx.config.admission;
    let framesLeft = false;
    try {
      if (this.held !== null && !this.releaseHeld()) return;
      let count = 0;
      let bytes = 0;
      let frame: RequestFrame | null;
      const window = this.window(); // fixed for the slice: replies written meanwhile only widen it
      for (;;) {
        if (this.closeWhenFlushed || this.barrier || this.outputPaused || this.replies.length >= window) {
          framesLeft = this.framer.bufferedBytes > 0;
          break;
        }
        if (count >= sliceRequests || bytes >= sliceBytes) {
          framesLeft = true;
          this.ctx.admission.wantTurn(this);
          break;
        }
        const tenant = this.state.tenant;
        // Its tenant's limits (src/tenants/tenant.ts): held, it is woken when they allow again.
        if (tenant !== null && this.framer.bufferedBytes > 0 && !tenant.mayAdmit(this)) {
          framesLeft = true;
          break;
        }
        if ((frame = this.framer.next()) === null) break; // at most a request still arriving
        count++;
        bytes += frame.raw.length;
        tenant?.admitted(frame.raw.length);
        if (!dispatch(this, frame)) return this.holdForPause(frame); // CLIENT PAUSE holds it
      }
    } catch (err) {
      if (!(err instanceof ProtocolError)) return this.failInternally(err);
      this.ctx.metrics?.protocolErrors.inc();
      this.replyNow(encodeError(err.message.startsWith('Protocol error') ? `ERR ${err.message}` : err.message));
      this.closeAfterReplies();
      return;
    }
    if (!this.checkQueryBytes()) return;
    // Read ahead of its turns only so far: the rest stays in the client's socket (TCP back-pressure).
    if (framesLeft && this.framer.bufferedBytes >= READ_AHEAD_BYTES) {
      this.backlogged = true;
      this.pauseReading();
    } else if (this.backlogged && (!framesLeft || this.framer.bufferedBytes < READ_AHEAD_BYTES / 2)) {
      this.backlogged = false;
      this.maybeResumeReading();
    }
    if (this.replies.length >= this.ctx.config.limits.maxPendingPerClient) this.pauseReading();
  }

  /** Whether its next request may be handed on now: no barrier, output drained, replies owed within its window. */
  private mayDispatch(): boolean {
    return !this.closeWhenFlushed && !this.barrier && !this.outputPaused && this.replies.length < this.window();
  }

  /**
   * Replies it may owe at once: admission.maxInflightPerClient, fewer when its replies are big (its
   * share of admission.maxInflightReplyBytesPerClient at its average reply size), at least one —
   * and COLD_WINDOW until its first reply was written: before that nothing tells how big its
   * replies are, so a new connection's pipeline of twenty 1 MiB GETs does not put 20 MiB on a
   * link at once (a round trip more for a new client that pipelines deeper; none for one that
   * does not).
   */
  private window(): number {
    if (this.repliesWritten === 0) return COLD_WINDOW;
    const { maxInflightPerClient, maxInflightReplyBytesPerClient } = this.ctx.config.admission;
    const byBytes = Math.floor(maxInflightReplyBytesPerClient / Math.max(1, this.replyAverage));
    return Math.max(1, Math.min(maxInflightPerClient, byBytes, this.ctx.config.limits.maxPendingPerClient));
  }

  /** Past limits.maxQueryBytesPerClient of unhandled request bytes: an error, then close (false). */
  private checkQueryBytes(): boolean {
    const max = this.ctx.config.limits.maxQueryBytesPerClient;
    if (this.framer.bufferedBytes <= max) return true;
    this.ctx.metrics?.protocolErrors.inc();
    this.replyNow(encodeError(ProxyError.queryBufferExceeded(this.framer.bufferedBytes, max)));
    this.closeAfterReplies();
    return false;
  }

  /**
   * Handling a request threw: a bug in respool, not the client's fault. Only this client pays:
   * it is disconnected (its requests owed get no reply rather than one that may belong to another
   * of them), the error is logged with its stack, and the process keeps serving everyone else.
   */
  private failInternally(err: unknown): void {
    this.ctx.metrics?.raw.client_disconnects_total.labels('internal_error').inc();
    this.ctx.log.error({ err, client: this.address, command: this.handling?.args[0]?.toString('latin1') ?? null }, 'respool failed handling a request; the client is disconnected');
    this.writer.discard();
    this.destroy();
  }

  /** CLIENT PAUSE holds this request (dispatch said so): keep it (copied), stop reading until the pause ends. */
  private holdForPause(frame: RequestFrame): void {
    this.held = RequestFrame.of(frame.args.map((a) => Buffer.from(a)), Buffer.from(frame.raw));
    this.state.pausedHeld = true;
    this.pauseReading();
    this.ctx.clientPause.hold(this);
  }

  /** Dispatches the held request again; false while the pause still holds it. */
  private releaseHeld(): boolean {
    const frame = this.held!;
    if (!dispatch(this, frame)) {
      this.ctx.clientPause.hold(this);
      return false;
    }
    this.held = null;
    this.state.pausedHeld = false;
    return true;
  }

  /** The pause ended (ClientPause): the held request first, then reading again. */
  resumeAfterPause(): void {
    if (this.closed || this.held === null) return;
    this.processFrames();
    this.maybeResumeReading();
  }

  joinTenant(tenant: Tenant | null, mayRefuse: boolean): TenantJoin {
    const was = this.state.tenant;
    if (tenant === was) return 'joined';
    // A tenant with upstreams of its own: what the client holds on the old ones (subscriptions, a
    // transaction, a lease, tracking) cannot follow it there.
    const ctx = this.ctx.contextOf?.(tenant) ?? this.ctx;
    if (mayRefuse && ctx !== this.ctx && this.holdsUpstreamState()) return 'elsewhere';
    if (tenant !== null && mayRefuse && !tenant.hasRoom()) {
      tenant.refused();
      return 'full';
    }
    moveClient(was, tenant, this.replies.length);
    this.state.tenant = tenant;
    this.replies.owed = tenant?.inflight ?? null;
    this.ctx = ctx;
    return 'joined';
  }

  /** It holds something on its upstreams beyond single requests: subscriptions, a transaction, a lease, tracking. */
  private holdsUpstreamState(): boolean {
    const s = this.state;
    return (s.subscriptions !== null && s.subscriptions.total() > 0) || s.transaction !== null || s.lane !== null || s.lease !== null || s.tracking !== null;
  }

  /** Its tenant's limits allow again (src/tenants/tenant.ts): what waits in its buffer gets a turn. */
  tenantReady(): void {
    this.wake();
  }

  /** Replies left or output drained: requests waiting in its buffer get a turn, reading may resume. */
  private wake(): void {
    if (this.closed) return;
    if (!this.waitingTurn && this.held === null && this.framer.bufferedBytes > 0 && this.mayDispatch()) this.ctx.admission.wantTurn(this);
    this.maybeResumeReading();
  }

  startRequest(frame: RequestFrame, family: CommandFamily, blocking: boolean, replyNames: ReplyNames | null = null): void {
    this.replies.replyNames = replyNames;
    // Entries this request pushes are timed from its chunk's arrival to their write (reply-queue.ts).
    const metrics = this.ctx.metrics;
    if (metrics !== undefined) {
      const replies = this.replies;
      replies.stamp = this.state.lastInteraction;
      replies.series = metrics.clientLatency(family);
      replies.request = frame;
      replies.family = family;
    }
    this.handling = frame;
    if (blocking) this.blockingArgvBytes = argvBytesOf(frame);
  }

  endRequest(): void {
    this.replies.replyNames = null;
    this.replies.series = null; // later pushes (pub/sub messages) are not this request's
    this.replies.request = null;
    this.handling = null;
  }

  buffers(): ClientBuffers {
    const held = this.replies.heldReplies();
    const current = this.handling ?? this.held;
    const argvBytes = current !== null ? argvBytesOf(current) : this.state.blocked ? this.blockingArgvBytes : 0;
    const unsent = this.writer.unsentBytes;
    const batched = this.writer.batchedBytes;
    return {
      queryBytes: this.framer.bufferedBytes,
      argvBytes,
      batchedBytes: batched,
      peakBatchBytes: this.writer.peakBatch(performance.now()),
      heldReplies: held.count,
      heldReplyBytes: held.bytes,
      unsentBytes: unsent - batched,
      reading: !this.readingPaused && !this.closed,
      bytesIn: this.bytesIn,
      bytesOut: this.bytesOut - unsent,
    };
  }

  private flushHead(): void {
    this.replies.drainHead(this);
    if (this.replies.length === 0) {
      if (this.closeWhenFlushed) {
        this.endSocket();
        return;
      }
      if (this.barrier) {
        if (this.exclusiveStart !== null) this.startExclusive();
        else this.liftBarrier();
        return;
      }
    }
    this.wake();
  }

  /** Called by the reply queue for each reply leaving its head, in order. */
  writeReply(reply: Buffer): void {
    if (this.closed) return;
    const n = ++this.repliesWritten;
    this.replyAverage += (reply.length - this.replyAverage) / (n < 8 ? n : 8); // the last ~8 replies
    this.write(reply);
  }

  /** Replies produced while handling one upstream chunk leave in one write (BatchedWriter); `now`: a push, sent at once when nothing is batched before it. */
  private write(data: Buffer, now = false): void {
    if (now) this.writer.writeNow(data);
    else this.writer.write(data);
    this.bytesOut += data.length;
    if (this.ctx.metrics !== undefined) this.ctx.metrics.traffic.clientOut += data.length;
    this.state.tenant?.replyWritten(data.length);
    const unread = this.writer.unsentBytes;
    const max = this.ctx.config.clients.maxOutputBytesPerClient;
    if (unread > max) return this.dropSlowClient(unread);
    if (!this.outputPaused && unread > Math.min(max / 2, 4 * 1024 * 1024)) this.pauseForOutput();
    if (unread >= HOLDER_BYTES) this.ctx.memory?.grew(this);
  }

  private pauseForOutput(): void {
    this.outputPaused = true;
    this.pauseReading();
    // Still stalled after outputStallMs: the client is not reading; let it go (soft limit).
    const stall = setTimeout(() => {
      if (this.outputPaused) this.dropSlowClient(this.writer.unsentBytes, true);
    }, this.ctx.config.clients.outputStallMs);
    stall.unref();
    this.writer.whenSent(() => {
      clearTimeout(stall);
      this.outputPaused = false;
      this.wake();
    });
  }

  /** The client stopped reading its replies (past the limit, or for outputStallMs): disconnect it (its memory must stay bounded). */
  private dropSlowClient(unread: number, stalled = false): void {
    if (this.closed) return;
    const { maxOutputBytesPerClient: max, outputStallMs } = this.ctx.config.clients;
    this.ctx.metrics?.raw.client_disconnects_total.labels('output_buffer').inc();
    const why = stalled ? ProxyError.outputStalled(unread, outputStallMs) : ProxyError.outputBufferExceeded(unread, max);
    this.ctx.log.warn({ event: 'client_dropped', reason: stalled ? 'output_stall' : 'output_buffer', client: this.address, unread, max }, why);
    this.writer.discard();
    this.socket.destroy();
    this.handleClose();
  }

  /**
   * The client closed its side. With nothing owed (no reply pending or unwritten, no request held)
   * the connection is closed now; otherwise Node ends it after what is queued (allowHalfOpen
   * false), as before. Saves a shutdown(2) and a stream 'finish' round per closing client.
   */
  private onEnd(): void {
    if (this.closed || this.closeWhenFlushed || this.replies.length > 0 || this.held !== null || this.barrier) return;
    if (this.writer.unsentBytes > 0) return;
    this.destroy();
  }

  private onIdle(): void {
    if (this.closed || this.replies.length > 0) return; // waiting on upstream is not idleness
    if (this.state.replicaStream) return; // Valkey's timeout spares replicas too: a quiet stream is not an idle client
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
    this.handleClose();
  }

  /** Writes what is owed, then closes fully (not a half-close: a client still writing must not block). */
  private endSocket(): void {
    this.writer.flush();
    this.socket.end(() => this.socket.destroy());
  }

  private pauseReading(): void {
    if (this.readingPaused) return;
    this.readingPaused = true;
    this.socket.pause();
  }

  /** Reads again once no bound holds it back: pending replies at half the limit, output drained, no backlog of requests. */
  private maybeResumeReading(): void {
    if (!this.readingPaused || this.outputPaused || this.backlogged || this.closeWhenFlushed || this.closed || this.barrier || this.held !== null) return;
    if (this.replies.length > this.ctx.config.limits.maxPendingPerClient / 2) return;
    this.readingPaused = false;
    this.socket.resume();
  }

  private handleClose(): void {
    if (this.closed) return;
    this.closed = true;
    if (this.held !== null) this.ctx.clientPause.forget(this);
    this.joinTenant(null, false);
    this.state.release();
    const hooks = this.closeHooks;
    this.closeHooks = null;
    if (hooks !== null) for (const fn of hooks) fn();
    this.ctx.onSessionClosed(this);
  }
}
