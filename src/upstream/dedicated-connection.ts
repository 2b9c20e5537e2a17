import { EventEmitter } from 'node:events';
import type net from 'node:net';
import { UpstreamSocket } from './upstream-socket.js';
import type { UpstreamTlsConfig } from '../config/tls-config.js';
import { handshakeCommands } from './handshake.js';
import { performance } from 'node:perf_hooks';
import { ReplyFramer } from '../resp/reply-framer.js';
import type { FramerLimits } from '../resp/limits.js';
import { encodeCommand } from '../resp/encode.js';
import { decodeReply } from '../resp/decode.js';
import { ProxyError } from '../errors.js';
import { FifoQueue } from '../util/fifo-queue.js';
import { BatchedWriter } from '../util/batched-writer.js';
import type { LinkRequest, LinkState, ReplySource } from './link.js';

export interface DedicatedConnectionOptions {
  host: string;
  port: number;
  protocol: 2 | 3;
  auth: { username: string | null; password: string } | null;
  connectTimeoutMs: number;
  /** CLIENT SETNAME of the upstream connection; default "respool-lease". */
  clientName?: string;
  /** The database it opens in (SELECT in the handshake when ≠ 0); default 0. */
  db?: number;
  framerLimits?: Partial<FramerLimits>;
  /** config.upstreamTls: TLS to the node when enabled (upstream/dial.ts). */
  tls?: UpstreamTlsConfig | null;
  /** Before the handshake (UpstreamSocketOptions.prepare): a mirrored identity made sure on the node. */
  prepare?: () => Promise<void>;
  /** The node refused the handshake's credentials (WRONGPASS). */
  onAuthRefused?: () => void;
  /** A user's upstream identity: HELLO carries AUTH and SETNAME, and its reply the client id (no CLIENT ID, which the user may not run). */
  identity?: boolean;
}

/** The `id` of a HELLO reply (a map in RESP3, a flat array in RESP2), or null. */
function helloClientId(frame: Buffer): number | null {
  const reply = decodeReply(frame);
  const entries: Array<[unknown, unknown]> = reply instanceof Map ? [...reply] : [];
  if (Array.isArray(reply)) for (let i = 0; i + 1 < reply.length; i += 2) entries.push([reply[i], reply[i + 1]]);
  for (const [k, v] of entries) {
    if (String(k) === 'id') {
      const id = Number(v);
      return Number.isSafeInteger(id) ? id : null;
    }
  }
  return null;
}

/** The name leased connections give themselves upstream (CLIENT LIST shows it). */
export const LEASE_CLIENT_NAME = 'respool-lease';

const PUSH = 0x3e; // '>'
const MINUS = 0x2d; // '-'
const COLON = 0x3a; // ':'

/** Control-plane requests of the handshake: their replies never reach a caller. */
interface HandshakeStep {
  args: ReadonlyArray<string>;
  onReply(frame: Buffer): void;
}

/**
 * One socket to one upstream node, leased to one client at a time (WATCH … EXEC, a blocking
 * command). Pipelined like a Link, but with no command timeout of its own: BLPOP k 0 may wait
 * for ever. The lease holder bounds the wait with setDeadline() when it wants one.
 *
 *   handshake: HELLO 3 [AUTH] SETNAME respool-lease (RESP3) or [AUTH], CLIENT SETNAME (RESP2),
 *              [SELECT db], then CLIENT ID → clientId (what CLIENT UNBLOCK needs); then 'ready'
 *   waiting  : requests sent before 'ready' — not written, safe to retry
 *   inflight : requests written, oldest first; the n-th reply frame belongs to the n-th entry
 *              (push frames '>' are out of band: they go to onPush, never to a request)
 *   deadline : null = none. While set, if the oldest in-flight request has waited longer than
 *              it, the whole connection fails: every in-flight request gets ProxyError.timeout
 *              (written, cause 'timeout'), waiting ones upstreamUnavailable (not written), and
 *              the socket closes — later frames could no longer be matched.
 *   invariant: a reply frame always completes inflight.shift(); nothing else reads replies.
 *
 * Events: 'ready'; 'settled' (a reply emptied the in-flight FIFO); 'close' (reason: string).
 */
export class DedicatedConnection extends EventEmitter implements ReplySource {
  readonly host: string;
  readonly port: number;
  readonly protocol: 2 | 3;
  /** "host:port" */
  readonly address: string;
  state: LinkState = 'connecting';
  closeReason = '';
  /** True once the handshake completed (a connection that closes before that was a failed dial). */
  wasReady = false;
  /** True when the connection failed because the oldest request waited past the deadline. */
  timedOut = false;
  /** The upstream's CLIENT ID for this connection; -1 until ready. */
  clientId = -1;
  /**
   * The database the connection is in: options.db after the handshake; a lease holder that
   * forwards SELECT on it sets what the server answered (handlers/leased-lane.ts), so that the
   * pool closes, rather than reuses, a connection handed back in another database.
   */
  db: number;
  /** RESP3 push frames (a view into the read buffer: copy to keep). Unset: pushes are dropped. */
  onPush: ((frame: Buffer) => void) | null = null;
  /**
   * Frames that answer no request (MONITOR's stream after its +OK). Unset: such a frame means the
   * FIFO can no longer be trusted and the connection fails.
   */
  onUnsolicited: ((frame: Buffer) => void) | null = null;
  /** Resolves when ready; rejects with the close reason if the connection closes before. */
  readonly opened: Promise<void>;

  private readonly conn: UpstreamSocket;
  private readonly socket: net.Socket;
  private readonly writer: BatchedWriter;
  private readonly framer: ReplyFramer;
  private readonly waiting = new FifoQueue<{ data: Buffer; req: LinkRequest }>();
  private readonly inflight = new FifoQueue<LinkRequest>();
  /** Handshake replies still expected; they precede every caller's request in `inflight`. */
  private handshakeSteps: HandshakeStep[] = [];
  private deadlineMs: number | null = null;
  private deadlineTimer: NodeJS.Timeout | null = null;
  private resolveOpened!: () => void;
  private rejectOpened!: (err: Error) => void;

  constructor(private readonly options: DedicatedConnectionOptions) {
    super();
    this.host = options.host;
    this.port = options.port;
    this.protocol = options.protocol;
    this.db = options.db ?? 0;
    this.address = `${options.host}:${options.port}`;
    this.opened = new Promise<void>((resolve, reject) => {
      this.resolveOpened = resolve;
      this.rejectOpened = reject;
    });
    this.opened.catch(() => {}); // observed through state/closeReason as well; never unhandled
    this.framer = new ReplyFramer(options.framerLimits);
    this.conn = new UpstreamSocket(options, {
      open: () => this.handshake(),
      data: (chunk) => this.onData(chunk),
      fail: (reason) => this.fail(reason),
    });
    this.socket = this.conn.socket;
    this.writer = new BatchedWriter(this.socket, 'immediate');
  }

  /** Caller requests sent and not yet answered (written or waiting for the handshake). */
  get inflightCount(): number {
    return this.inflight.length - this.handshakeSteps.length + this.waiting.length;
  }

  /** The current deadline in ms, or null. */
  get deadline(): number | null {
    return this.deadlineMs;
  }

  /**
   * Queues `raw` (exactly one complete RESP request; its one reply goes to `req`). Before the
   * handshake completes it waits; after close it fails at once, marked as not written.
   */
  send(raw: Buffer, req: LinkRequest): void {
    if (this.state === 'ready') {
      this.writeNow(raw, req);
    } else if (this.state === 'connecting') {
      this.waiting.push({ data: raw, req });
    } else {
      req.onLinkFailure(ProxyError.upstreamUnavailable(this.address, this.closeReason), false);
    }
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

  private writeNow(data: Buffer, req: LinkRequest): void {
    req.sentAt = performance.now();
    this.inflight.push(req);
    this.writer.write(data);
    if (this.deadlineTimer === null) this.armDeadline();
  }

  private handshake(): void {
    const { auth, protocol, identity } = this.options;
    const clientName = this.options.clientName ?? LEASE_CLIENT_NAME;
    const steps: HandshakeStep[] = handshakeCommands(protocol, auth, clientName, this.db, identity === true).map((args) => ({ args, onReply: () => {} }));
    if (identity === true) {
      // HELLO's reply holds the client id; the last step (HELLO, or SELECT after it) makes it ready.
      steps[0]!.onReply = (frame) => {
        const id = helloClientId(frame);
        if (id === null) this.fail(`handshake HELLO: no client id in ${JSON.stringify(frame.toString('latin1', 0, 40))}`);
        else this.clientId = id;
      };
      const last = steps[steps.length - 1]!;
      const before = last.onReply;
      last.onReply = (frame) => {
        before(frame);
        if (this.state === 'connecting') this.becomeReady();
      };
    } else {
      steps.push({
        args: ['CLIENT', 'ID'],
        onReply: (frame) => {
          const id = frame[0] === COLON ? Number(frame.toString('latin1', 1, frame.length - 2)) : NaN;
          if (!Number.isSafeInteger(id)) {
            this.fail(`handshake CLIENT ID: unexpected reply ${JSON.stringify(frame.toString('latin1', 0, 40))}`);
            return;
          }
          this.clientId = id;
          this.becomeReady();
        },
      });
    }
    this.handshakeSteps = steps;
    for (const step of steps) {
      // Handshake entries sit in `inflight` like any request; onData routes their frames here.
      this.inflight.push({ sentAt: performance.now(), onReply() {}, onLinkFailure() {} });
      this.writer.write(encodeCommand(step.args));
    }
  }

  private onHandshakeReply(frame: Buffer): void {
    const step = this.handshakeSteps.shift()!;
    if (frame[0] === MINUS) {
      const error = frame.toString('utf8', 1).trim();
      if (error.startsWith('WRONGPASS')) this.options.onAuthRefused?.();
      this.fail(`handshake ${step.args[0]} failed: ${error}`);
      return;
    }
    step.onReply(frame);
  }

  private becomeReady(): void {
    if (this.state !== 'connecting') return;
    this.conn.connectDone();
    this.state = 'ready';
    this.wasReady = true;
    for (const { data, req } of this.waiting.drain()) this.writeNow(data, req);
    this.resolveOpened();
    this.emit('ready');
  }

  private onData(chunk: Buffer): void {
    this.framer.push(chunk);
    let frame: Buffer | null;
    try {
      while ((frame = this.framer.next()) !== null) {
        if (frame[0] === PUSH) {
          this.onPush?.(frame);
          if (this.state === 'closed') return;
          continue;
        }
        const req = this.inflight.shift();
        if (req === undefined) {
          if (this.onUnsolicited !== null) {
            this.onUnsolicited(frame);
            if (this.state === 'closed') return;
            continue;
          }
          this.fail('upstream sent a reply nobody asked for');
          return;
        }
        if (this.handshakeSteps.length > 0) {
          this.onHandshakeReply(frame);
        } else {
          req.onReply(frame, this);
          if (this.inflight.length === 0 && this.waiting.length === 0 && this.state === 'ready') this.emit('settled');
        }
        if (this.state === 'closed') return;
      }
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
  private fail(reason: string, isTimeout = false): void {
    if (this.state === 'closed') return;
    const wasConnecting = this.state === 'connecting';
    this.state = 'closed';
    this.closeReason = reason;
    this.timedOut = isTimeout;
    if (this.deadlineTimer) clearTimeout(this.deadlineTimer);
    this.deadlineTimer = null;
    this.writer.discard();
    this.conn.destroy();
    // Handshake entries are ours: drop them without telling anybody.
    for (let i = 0; i < this.handshakeSteps.length; i++) this.inflight.shift();
    this.handshakeSteps = [];
    const inflightError = isTimeout ? reason : ProxyError.connectionLost(this.address);
    const cause = isTimeout ? 'timeout' : undefined;
    for (const req of this.inflight.drain()) req.onLinkFailure(inflightError, true, cause);
    const unsentError = ProxyError.upstreamUnavailable(this.address, reason);
    for (const { req } of this.waiting.drain()) req.onLinkFailure(unsentError, false);
    if (wasConnecting) this.rejectOpened(new Error(unsentError));
    this.emit('close', reason);
  }
}
