/**
 * One RESP3 subscriber connection to one upstream node, owned by the PubSubHub.
 *
 * RESP3, so the server's pushes (`>`) are told apart from ordinary replies: in RESP3 Valkey
 * sends messages *and* (un)subscribe confirmations as pushes (pubsub.c addReplyPushLen), and
 * everything else (HELLO's map, PING's +PONG, an error refusing a whole command) as a reply.
 *
 *   pending : commands written, oldest first. A (P|S)(UN)SUBSCRIBE of n names is answered by n
 *             confirmation pushes of its own kind, in argument order, or by one error reply
 *             (ACL, CROSSSLOT, MOVED: the whole command refused). HELLO and PING get one reply.
 *   invariant: a confirmation push or a non-push reply always belongs to pending.peek(); a push
 *             that does not match it is either an unsolicited `sunsubscribe` (Valkey dropped a
 *             shard channel: slot moved, node demoted — cluster_legacy.c removeChannelsInSlot)
 *             or a desync, and a desync closes the connection (the hub then re-subscribes).
 *   messages: `message` / `pmessage` / `smessage` pushes go to the handler as views of the read
 *             buffer, valid until the handler returns; consecutive ones for one name in one read
 *             go as one run (message-run.ts), handed on before anything else is handled.
 *   outbox  : UNSUBSCRIBEs asked for during one turn (unsubscribeLater) leave together at its end,
 *             and before any SUBSCRIBE sent on this connection meanwhile, so a name released and
 *             wanted again in one turn ends subscribed.
 *   socket  : set up as every long-lived upstream socket is (upstream/upstream-socket.ts: dial,
 *             keepalive, the connect deadline through HELLO, reads through the shared buffer).
 *   liveness: the oldest pending command may wait timeouts.commandMs while nothing arrives; an
 *             idle connection is PINGed every pingIntervalMs so a black-holed node is noticed
 *             too. A node that keeps sending pushes is alive even if a reply waits behind them
 *             (a fan-out of millions of messages): closing it then would lose messages.
 */
import { openUpstreamSocket, type OpenUpstreamSocket, type UpstreamConnectionSocket } from '../upstream/upstream-socket.js';
import type { UpstreamTlsConfig } from '../config/tls-config.js';
import { handshakeCommands } from '../upstream/handshake.js';
import { performance } from 'node:perf_hooks';
import { ReplyFramer } from '../resp/reply-framer.js';
import { encodeCommand } from '../resp/encode.js';
import { UNBOUNDED_NESTING, type FramerLimits } from '../resp/limits.js';
import type { RespoolConfig } from '../config/types.js';
import { BatchedWriter } from '../util/batched-writer.js';
import { FifoQueue } from '../util/fifo-queue.js';
import { MessageRun } from './message-run.js';

export type UpstreamSubscribeCommand = 'subscribe' | 'psubscribe' | 'ssubscribe' | 'unsubscribe' | 'punsubscribe' | 'sunsubscribe';
export type MessageKind = 'message' | 'pmessage' | 'smessage';

export const PUBSUB_CLIENT_NAME = 'respool-pubsub';

export interface SubscriberConnectionOptions {
  host: string;
  port: number;
  auth: { username: string | null; password: string } | null;
  connectTimeoutMs: number;
  commandTimeoutMs: number;
  pingIntervalMs: number;
  framerLimits?: Partial<FramerLimits>;
  /** config.upstreamTls: TLS to the node when enabled (upstream/dial.ts). */
  tls?: UpstreamTlsConfig | null;
  /** How the socket is opened (upstream/upstream-socket.ts); a test may give a fake. */
  openSocket?: OpenUpstreamSocket;
}

export interface SubscriberConnectionHandler {
  ready(conn: SubscriberConnection): void;
  /**
   * Message pushes for one name: a run of one or more that arrived together (message-run.ts).
   * `channel`/`pattern` are latin1 keys of the names; `frames` holds the whole pushes back to back
   * (a view), `starts` the offset of each. `pattern` is null unless kind is 'pmessage'.
   */
  message(conn: SubscriberConnection, kind: MessageKind, pattern: string | null, channel: string, frames: Buffer, starts: readonly number[]): void;
  /** Valkey sent `sunsubscribe <channel>` that no command of ours asked for. */
  shardChannelDropped(conn: SubscriberConnection, channel: string): void;
  closed(conn: SubscriberConnection, reason: string): void;
  /** The node refused an UNSUBSCRIBE sent from the outbox (logged by the owner). */
  unsubscribeRefused?(conn: SubscriberConnection, command: UpstreamSubscribeCommand, error: string): void;
}

/** What a (un)subscribe command reports back, per name and for the whole command. */
export interface CommandCallbacks {
  /** The i-th name's confirmation push came. */
  confirmed(index: number): void;
  /** The command was refused as a whole (error reply), or the connection ended first. */
  failed(error: string, connectionLost: boolean): void;
}

interface Pending {
  kind: UpstreamSubscribeCommand | 'hello' | 'ping';
  names: Buffer[];
  /** Next name whose confirmation is expected. */
  index: number;
  callbacks: CommandCallbacks | null;
  sentAt: number;
}

const PUSH = 0x3e; // '>'
const ERROR = 0x2d; // '-'
const CONFIRMATION_KINDS: ReadonlySet<string> = new Set(['subscribe', 'psubscribe', 'ssubscribe', 'unsubscribe', 'punsubscribe', 'sunsubscribe']);

/** Most names in one upstream command (re-subscribing thousands of channels after a reconnect). */
export const MAX_NAMES_PER_COMMAND = 1000;

/** A subscriber connection to host:port with respool's settings (upstreamAuth, TLS, timeouts, limits). */
export function subscriberConnectionFor(config: Pick<RespoolConfig, 'timeouts' | 'upstreamAuth' | 'limits' | 'upstreamTls'>, host: string, port: number, handler: SubscriberConnectionHandler): SubscriberConnection {
  const { timeouts, upstreamAuth, limits } = config;
  return new SubscriberConnection(
    {
      host, port, auth: upstreamAuth, tls: config.upstreamTls ?? null,
      connectTimeoutMs: timeouts.connectMs,
      commandTimeoutMs: timeouts.commandMs,
      pingIntervalMs: Math.max(1000, timeouts.commandMs),
      framerLimits: {
        maxBulkLength: limits.maxBulkLength,
        maxArrayLength: limits.maxArrayLength,
        maxNestingDepth: UNBOUNDED_NESTING, // resp/limits.ts: replies of any depth
      },
    },
    handler,
  );
}

export class SubscriberConnection {
  readonly address: string;
  state: 'connecting' | 'ready' | 'closed' = 'connecting';
  closeReason = '';
  private readonly conn: UpstreamConnectionSocket;
  private readonly writer: BatchedWriter;
  private readonly framer: ReplyFramer;
  private readonly pending = new FifoQueue<Pending>();
  /** Commands issued before the handshake finished, written once it does. */
  private readonly queued: Array<{ data: Buffer; pending: Pending }> = [];
  /** UNSUBSCRIBEs to write at the end of this turn, by command (see `outbox` above). */
  private outbox: Map<UpstreamSubscribeCommand, Buffer[]> | null = null;
  /** Names UNSUBSCRIBEd (asked for, or sent) that the node has not confirmed: it still counts them for PUBLISH. */
  private leaving = 0;
  private readonly whenSettled: Array<() => void> = [];
  private tickTimer: NodeJS.Timeout | null = null;
  private lastWriteAt = performance.now();
  /** When bytes last arrived (pushes count: they prove the node alive). */
  private lastReadAt = performance.now();
  /** Messages of this read not handed on yet (message-run.ts). */
  private readonly run: MessageRun;

  constructor(
    private readonly options: SubscriberConnectionOptions,
    private readonly handler: SubscriberConnectionHandler,
  ) {
    this.address = `${options.host}:${options.port}`;
    this.framer = new ReplyFramer(options.framerLimits);
    this.run = new MessageRun((kind, pattern, channel, frames, starts) => this.handler.message(this, kind, pattern, channel, frames, starts));
    this.conn = (options.openSocket ?? openUpstreamSocket)(options, {
      open: () => this.handshake(),
      data: (chunk) => this.onData(chunk),
      fail: (reason) => this.close(reason),
    });
    this.writer = new BatchedWriter(this.conn.socket, 'immediate');
  }

  isClosed(): boolean {
    return this.state === 'closed';
  }

  /** Commands written or queued and not fully answered. */
  get pendingCount(): number {
    return this.pending.length + this.queued.length;
  }

  /** Sends one (un)subscribe command for `names` (at most MAX_NAMES_PER_COMMAND, at least one); UNSUBSCRIBEs queued this turn go first. */
  send(kind: UpstreamSubscribeCommand, names: Buffer[], callbacks: CommandCallbacks): void {
    if (this.outbox !== null) this.flushOutbox();
    if (this.state === 'closed') {
      callbacks.failed(`connection to ${this.address} is closed (${this.closeReason})`, true);
      return;
    }
    const pending: Pending = { kind, names, index: 0, callbacks, sentAt: 0 };
    const data = encodeCommand([kind.toUpperCase(), ...names]);
    if (this.state === 'ready') this.write(data, pending);
    else this.queued.push({ data, pending });
  }

  /** `command` (an UNSUBSCRIBE kind) of `name`, written with the others asked for this turn at its end. */
  unsubscribeLater(command: UpstreamSubscribeCommand, name: Buffer): void {
    if (this.state === 'closed') return;
    this.leaving++; // settled again once the node confirmed it (flushOutbox)
    let outbox = this.outbox;
    if (outbox === null) {
      outbox = this.outbox = new Map();
      queueMicrotask(() => this.flushOutbox());
    }
    let names = outbox.get(command);
    if (names === undefined) outbox.set(command, (names = []));
    names.push(name);
  }

  private flushOutbox(): void {
    const outbox = this.outbox;
    this.outbox = null;
    if (outbox === null || this.state === 'closed') return;
    for (const [command, names] of outbox) {
      for (let i = 0; i < names.length; i += MAX_NAMES_PER_COMMAND) {
        const batch = names.slice(i, i + MAX_NAMES_PER_COMMAND);
        this.send(command, batch, {
          confirmed: () => this.left(batch.length),
          failed: (error, lost) => {
            this.left(batch.length);
            if (!lost) this.handler.unsubscribeRefused?.(this, command, error);
          },
        });
      }
    }
  }

  /** Whether every UNSUBSCRIBE asked for here has been confirmed by the node (it counts no name respool let go). */
  get unsubscribesSettled(): boolean {
    return this.leaving === 0 || this.state === 'closed';
  }

  /** Runs `then` once every UNSUBSCRIBE asked for so far is confirmed (or the connection is gone). */
  afterUnsubscribes(then: () => void): void {
    if (this.unsubscribesSettled) return then();
    this.whenSettled.push(then);
  }

  private left(names: number): void {
    this.leaving = Math.max(0, this.leaving - names);
    if (this.leaving === 0) for (const then of this.whenSettled.splice(0)) then();
  }

  close(reason = 'closed by respool'): void {
    if (this.state === 'closed') return;
    this.run.flush(); // what arrived before the close is delivered, as before it
    this.state = 'closed';
    this.closeReason = reason;
    this.outbox = null;
    this.leaving = 0;
    if (this.tickTimer) clearInterval(this.tickTimer);
    this.writer.discard();
    this.conn.destroy();
    const error = `connection to upstream ${this.address} was lost (${reason})`;
    for (const p of this.pending.drain()) p.callbacks?.failed(error, true);
    for (const { pending } of this.queued.splice(0)) pending.callbacks?.failed(error, true);
    for (const then of this.whenSettled.splice(0)) then();
    this.handler.closed(this, reason);
  }

  private write(data: Buffer, pending: Pending): void {
    pending.sentAt = this.lastWriteAt = performance.now();
    this.pending.push(pending);
    this.writer.write(data);
  }

  private handshake(): void {
    const [hello] = handshakeCommands(3, this.options.auth, PUBSUB_CLIENT_NAME);
    this.write(encodeCommand(hello!), { kind: 'hello', names: [], index: 0, callbacks: null, sentAt: 0 });
  }

  private becomeReady(): void {
    if (this.state !== 'connecting') return;
    this.conn.connectDone();
    this.state = 'ready';
    const tick = Math.max(50, Math.min(1000, Math.floor(this.options.commandTimeoutMs / 4)));
    this.tickTimer = setInterval(() => this.tick(), tick);
    this.tickTimer.unref();
    for (const { data, pending } of this.queued.splice(0)) this.write(data, pending);
    this.handler.ready(this);
  }

  private tick(): void {
    const now = performance.now();
    const oldest = this.pending.peek();
    const timeout = this.options.commandTimeoutMs;
    if (oldest && now - oldest.sentAt > timeout && now - this.lastReadAt > timeout) {
      this.close(`no reply within ${this.options.commandTimeoutMs} ms`);
      return;
    }
    if (!oldest && now - this.lastWriteAt > this.options.pingIntervalMs) {
      this.write(encodeCommand(['PING']), { kind: 'ping', names: [], index: 0, callbacks: null, sentAt: 0 });
    }
  }

  private onData(chunk: Buffer): void {
    if (this.state === 'closed') return;
    this.lastReadAt = performance.now();
    this.framer.push(chunk);
    let frame: Buffer | null;
    try {
      // A handler may close the connection mid-loop: stop reading its frames then.
      while (!this.isClosed() && (frame = this.framer.next()) !== null) {
        if (frame[0] === PUSH) {
          this.onPush(frame);
        } else {
          this.run.flush();
          this.onReply(frame);
        }
      }
    } catch (err) {
      this.close(`unreadable reply from upstream: ${(err as Error).message}`);
    }
    this.run.flush();
  }

  /** A non-push reply: HELLO's, PING's, or an error refusing the oldest command whole. */
  private onReply(frame: Buffer): void {
    const head = this.pending.peek();
    if (head === undefined) {
      this.close('upstream sent a reply nobody asked for');
      return;
    }
    const isError = frame[0] === ERROR;
    const text = isError ? frame.toString('utf8', 1, frame.length - 2) : '';
    if (head.kind === 'hello') {
      this.pending.shift();
      if (isError) this.close(`handshake HELLO failed: ${text}`);
      else this.becomeReady();
      return;
    }
    if (head.kind === 'ping') {
      this.pending.shift();
      return;
    }
    if (!isError || head.index > 0) {
      this.close(`unexpected reply to ${head.kind.toUpperCase()}: ${frame.toString('latin1', 0, Math.min(frame.length, 80))}`);
      return;
    }
    this.pending.shift();
    head.callbacks?.failed(text, false);
  }

  private onPush(frame: Buffer): void {
    const reader = new PushReader(frame);
    const kind = reader.string();
    if (kind === 'message' || kind === 'smessage') {
      const channel = reader.string();
      if (channel !== null) this.run.add(kind, null, channel, frame);
      return;
    }
    if (kind === 'pmessage') {
      const pattern = reader.string();
      const channel = reader.string();
      if (pattern !== null && channel !== null) this.run.add(kind, pattern, channel, frame);
      return;
    }
    this.run.flush(); // a confirmation (or anything else) comes after the messages before it
    if (kind === null || !CONFIRMATION_KINDS.has(kind)) return; // other pushes (none expected) are ignored
    const name = reader.string();
    const head = this.pending.peek();
    if (head !== undefined && head.kind === kind && name !== null && head.names[head.index]!.toString('latin1') === name) {
      const index = head.index++;
      if (head.index === head.names.length) this.pending.shift();
      head.callbacks?.confirmed(index);
      return;
    }
    if (kind === 'sunsubscribe' && name !== null) {
      this.handler.shardChannelDropped(this, name);
      return;
    }
    this.close(`unexpected ${kind} push for ${JSON.stringify(name)} (expected ${head ? head.kind : 'nothing'})`);
  }
}

/**
 * Reads the top-level elements of a push frame one at a time: bulk strings (as latin1 keys),
 * null (`_`, `$-1`) and simple lines. Enough for the fixed shapes of pub/sub pushes; no nesting.
 */
class PushReader {
  private pos: number;

  constructor(private readonly frame: Buffer) {
    this.pos = frame.indexOf(0x0a) + 1; // skip `>n\r\n`
  }

  /** The next element as a latin1 string; null for a null, or anything unreadable. */
  string(): string | null {
    const f = this.frame;
    const type = f[this.pos];
    const lineEnd = f.indexOf(0x0d, this.pos);
    if (type === undefined || lineEnd < 0) return null;
    if (type === 0x24 /* $ */) {
      const len = Number(f.toString('latin1', this.pos + 1, lineEnd));
      if (!(len >= 0)) {
        this.pos = lineEnd + 2;
        return null; // $-1
      }
      const start = lineEnd + 2;
      this.pos = start + len + 2;
      return f.toString('latin1', start, start + len);
    }
    const text = f.toString('latin1', this.pos + 1, lineEnd);
    this.pos = lineEnd + 2;
    return type === 0x5f /* _ */ ? null : text;
  }
}
