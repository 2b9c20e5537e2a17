import type { Socket } from 'node:net';
import { RequestFramer, type RequestFrame } from '../resp/request-framer.js';
import { ProtocolError } from '../resp/protocol-error.js';
import { encodeError } from '../resp/encode.js';
import { ProxyError } from '../errors.js';
import { dispatch } from '../handlers/index.js';
import type { CommandFamily } from '../commands/proxy-handling.js';
import type { ClientBuffers, DispatchedSession } from '../client/handler-session.js';
import type { ServerContext } from '../client/server-context.js';
import { ClientOutput, type OutputOwner } from './client-output.js';
import { argvBytesOf, clientBuffers } from './client-buffers.js';
import { ReplyEntry, ReplyQueue } from '../client/reply-queue.js';
import { ClientState } from '../client/client-state.js';
import type { UpstreamIdentity } from '../acl/upstream-identity.js';
import { sessionSocket, socketAddress, type SocketEvents } from './session-socket.js';
import { dispatchHeld, holdForPause } from './held-request.js';
import { holdClock, releaseClock } from '../util/read-clock.js';
import { replyWindow, type AdmittedClient } from '../client/fair-admission.js';
import type { ReplyNames } from '../keys/reply-names.js';
import { laneClass, type LaneClass } from '../client/lane-class.js';
import type { Tenant } from '../tenants/tenant.js';
import { joinTenant } from './tenant-join.js';
import type { TenantJoin } from '../client/handler-session.js';

// What a session costs between requests (storms, idle clients): one object per part, no closures per
// session (session-socket.ts), one shared framer limits object, the pushes' size queue made on first use.

/**
 * How far ahead of its turn a client's socket is read: past this many request bytes waiting to be
 * handed on (a deep pipeline), reading stops until half of it went (TCP back-pressure holds the
 * rest in the client's socket, as Valkey's 16 KiB reads do). A request still arriving is read on.
 */
const READ_AHEAD_BYTES = 256 * 1024;

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
 *   output   : what the client has not read stays under clients.maxOutputBytesPerClient, or it
 *             is disconnected (client-output.ts); past half of it the session stops reading its
 *             requests and hands none on until the socket drains: a slow reader adds no work to
 *             the shared links and holds only its own bytes (never a link: the links are always
 *             read). Across all clients, limits.maxMemory disconnects the ones holding the most
 *             (client/memory-ceiling.ts).
 *   idle     : clients.idleTimeoutMs without traffic and nothing pending closes the connection.
 *   close    : a client that closes its side with nothing owed is closed at once (socketEnd).
 */
export class ClientSession implements DispatchedSession, AdmittedClient, OutputOwner, SocketEvents {
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
  /** Reading paused because READ_AHEAD_BYTES of requests wait for their turn (see `turns` above). */
  private backlogged = false;
  private closeWhenFlushed = false;
  private readingHeld = false;
  /** Replies and pushes on their way to the socket, and the output's bounds (client-output.ts). */
  private readonly output: ClientOutput;
  /** The request CLIENT PAUSE holds back (copied), until the pause ends; reading stops meanwhile. */
  private held: RequestFrame | null = null;
  /** The request being handled now, and the argument bytes of the last blocking one (argv-mem while it is blocked; a number, so no read slab stays pinned). */
  private handling: RequestFrame | null = null;
  private blockingArgvBytes = 0;
  private bytesIn = 0; // read from the client (CLIENT LIST tot-net-in)
  /** A takeover waiting for this session to be idle (session-handover.ts): true takes the chunk. */
  takeIdle: ((chunk: Buffer) => boolean) | null = null;

  /** The client's socket: the accepted one, or its re-wrap reading through the shared buffer (shared-reads.ts). */
  readonly socket: Socket;

  constructor(
    accepted: Socket,
    /** The proxy as this client sees it: its tenant's upstreams (contextOf; it changes when its user's tenant does). */
    public ctx: ServerContext,
  ) {
    const socket = sessionSocket(accepted, this, ctx.config.clients.idleTimeoutMs);
    this.socket = socket;
    this.id = ctx.nextClientId();
    this.state = new ClientState(ctx.users); // respool's users (src/acl/user-directory.ts)
    this.framer = new RequestFramer(ctx.config.limits); // its bulk, array and inline bounds (one shared limits object: resp/limits.ts)
    // TCP_NODELAY and keepalive: from the listening socket, or set on accept (session/socket-options.ts).
    this.output = new ClientOutput(socket, this);
    this.replies.observer = ctx.observer ?? null; // slow log, per-command latency (observe/request-observer.ts)
    // A client starts as the default user: one of that user's tenant's clients, if it has room.
    const tenant = ctx.tenants.of(this.state.user);
    if (tenant !== null && this.joinTenant(tenant, true) !== 'joined') {
      this.replyNow(encodeError(ProxyError.tenantMaxClients(tenant.name, tenant.maxClients)));
      this.closeAfterReplies();
    }
  }

  get pending(): number {
    return this.replies.length;
  }

  afterNextReply(fn: () => void): void {
    // Several may wait for one reply (the near cache's write mark and a migration's copy): each runs, in the order asked.
    const before = this.replies.afterReply;
    this.replies.afterReply = before === null ? fn : () => {
      before();
      fn();
    };
  }

  /** The lane of its next placement on a node's links (client/lane-class.ts). */
  get laneClass(): LaneClass {
    const out = this.output;
    return laneClass(this.framer.bufferedBytes, this.ctx.config.admission.sliceBytes, out.repliesWritten, out.replyAverage, out.paused);
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
    return socketAddress(this.socket, 'remote', this.ctx.config.unixSocket);
  }

  get localAddress(): string {
    return socketAddress(this.socket, 'local', this.ctx.config.unixSocket);
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
   * A pub/sub push: written now when no reply is owed, else queued behind every reply owed
   * (copied: a view into a subscriber connection's read buffer). Past pubsub.maxOutputBytesPerClient
   * unread it is disconnected at once (client-output.ts): a slow subscriber delays no other.
   */
  push(frame: Buffer): void {
    if (this.closed || this.closeWhenFlushed) return; // QUIT, drain: nothing after the last reply
    if (this.replies.length === 0) {
      this.output.pushNow(frame);
      if (this.closed) return; // past clients.maxOutputBytesPerClient: already dropped
    } else {
      this.output.queuedPush(frame.length, this.replies.length);
      this.replies.push(new ReplyEntry(this, Buffer.from(frame)));
    }
    this.output.checkPushBound();
  }

  unreadOutputBytes(): number {
    return this.output.unreadBytes();
  }

  /** Replies respool holds for it: not yet taken by the kernel, or finished and waiting in its queue (limits.maxMemory, CLIENT LIST omem). */
  outputBytes(): number {
    return this.output.writer.unsentBytes + this.replies.heldBytes;
  }

  /** Replies owed and not come yet, at its average reply size: they land in its output whether it reads or not. */
  comingBytes(): number {
    return (this.replies.length - this.replies.heldCount) * this.output.replyAverage;
  }

  /** Request bytes read and not handed on yet (CLIENT LIST qbuf). */
  queryBytes(): number {
    return this.framer.bufferedBytes;
  }

  /** Among the clients holding the most when respool's buffers passed limits.maxMemory (memory-ceiling.ts): closed now, its replies dropped. */
  dropForMemory(): void {
    if (this.closed) return;
    this.ctx.metrics?.raw.client_disconnects_total.labels('max_memory').inc();
    this.output.drop();
  }

  whenOutputBelow(bytes: number, fn: () => void): void {
    this.output.whenBelow(bytes, fn);
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

  /** Bytes from the client (session-socket.ts). */
  socketData(chunk: Buffer): void {
    if (this.closeWhenFlushed || this.takeIdle?.(chunk) === true) return;
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
      if (this.held !== null) {
        if (!dispatchHeld(this, this.held)) return;
        this.held = null;
      }
      let count = 0;
      let bytes = 0;
      let frame: RequestFrame | null;
      const window = this.window(); // fixed for the slice: replies written meanwhile only widen it
      for (;;) {
        if (this.closeWhenFlushed || this.barrier || this.output.paused || this.replies.length >= window) {
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
        if (!dispatch(this, frame)) return void (this.held = holdForPause(this, frame)); // CLIENT PAUSE holds it
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
    return !this.closeWhenFlushed && !this.barrier && !this.output.paused && this.replies.length < this.window();
  }

  /** Replies it may owe at once (fair-admission.ts replyWindow). */
  private window(): number {
    return replyWindow(this.output.repliesWritten, this.output.replyAverage, this.ctx.config, this.output.distanceMs);
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
    this.output.drop();
  }

  /** The pause ended (ClientPause): the held request first, then reading again. */
  resumeAfterPause(): void {
    if (this.closed || this.held === null) return;
    this.processFrames();
    this.maybeResumeReading();
  }

  /** Moves it to `tenant`'s clients (its user's, at AUTH / HELLO / RESET): tenant-join.ts. */
  joinTenant(tenant: Tenant | null, mayRefuse: boolean): TenantJoin {
    const joined = joinTenant(this, this.replies, tenant, mayRefuse);
    if (typeof joined === 'string') return joined;
    this.ctx = joined;
    return 'joined';
  }

  /** Its tenant's limits allow again (src/tenants/tenant.ts): what waits in its buffer gets a turn. */
  tenantReady(): void {
    this.wake();
  }

  /** Replies left or output drained: requests waiting in its buffer get a turn, reading may resume. */
  wake(): void {
    if (this.closed) return;
    if (!this.waitingTurn && this.held === null && this.framer.bufferedBytes > 0 && this.mayDispatch()) this.ctx.admission.wantTurn(this);
    this.maybeResumeReading();
  }

  startRequest(frame: RequestFrame, family: CommandFamily, blocking: boolean, replyNames: ReplyNames | null = null): void {
    this.replies.beginRequest(frame, family, replyNames, this.state.lastInteraction, this.ctx.metrics?.clientLatency(family) ?? null);
    this.handling = frame;
    if (blocking) this.blockingArgvBytes = argvBytesOf(frame);
  }

  endRequest(): void {
    this.replies.endRequest();
    this.handling = null;
  }

  buffers(): ClientBuffers {
    const current = this.handling ?? this.held;
    const argvBytes = current !== null ? argvBytesOf(current) : this.state.blocked ? this.blockingArgvBytes : 0;
    return clientBuffers(this.framer.bufferedBytes, argvBytes, this.replies.heldReplies(), this.output, !this.readingPaused && !this.closed, this.bytesIn);
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
  writeReply(reply: Buffer, upstreamMs: number): void {
    if (!this.closed) this.output.writeReply(reply, upstreamMs);
  }

  /**
   * The client closed its side. With nothing owed (no reply pending or unwritten, no request held)
   * the connection is closed now; otherwise Node ends it after what is queued (allowHalfOpen
   * false), as before. Saves a shutdown(2) and a stream 'finish' round per closing client.
   */
  socketEnd(): void {
    if (this.closed || this.closeWhenFlushed || this.replies.length > 0 || this.held !== null || this.barrier) return;
    if (this.output.writer.unsentBytes > 0) return;
    this.destroy();
  }

  socketIdle(): void {
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
    this.socketClosed();
  }

  /** Writes what is owed, then closes fully (not a half-close: a client still writing must not block). */
  private endSocket(): void {
    this.output.writer.flush();
    this.socket.end(() => this.socket.destroy());
  }

  pauseReading(): void {
    if (this.readingPaused) return;
    this.readingPaused = true;
    this.socket.pause();
  }

  /** Reads no more from its socket until it closes: what the client sends stays in the kernel, for the process it is handed to (session-handover.ts). */
  holdReading(): void {
    this.readingHeld = true;
    this.pauseReading();
  }

  /** Reads again once no bound holds it back: pending replies at half the limit, output drained, no backlog of requests. */
  private maybeResumeReading(): void {
    if (!this.readingPaused || this.readingHeld || this.output.paused || this.backlogged || this.closeWhenFlushed || this.closed || this.barrier || this.held !== null) return;
    if (this.replies.length > this.ctx.config.limits.maxPendingPerClient / 2) return;
    this.readingPaused = false;
    this.socket.resume();
  }

  /** The socket closed (session-socket.ts), or respool ended it (destroy). */
  socketClosed(): void {
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
