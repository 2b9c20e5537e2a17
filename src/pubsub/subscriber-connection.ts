/**
 * One RESP3 subscriber connection to one upstream node, owned by the PubSubHub: a role on the
 * connection core (upstream/node-connection.ts), which holds its FIFO, handshake and socket.
 *
 * RESP3, so the server's pushes (`>`) are told apart from ordinary replies: in RESP3 Valkey
 * sends messages *and* (un)subscribe confirmations as pushes (pubsub.c addReplyPushLen), and
 * everything else (HELLO's map, PING's +PONG, an error refusing a whole command) as a reply.
 *
 *   pending : commands written, oldest first (the core's FIFO). A (P|S)(UN)SUBSCRIBE of n names
 *             is answered by n confirmation pushes of its own kind, in argument order
 *             (pushReplies: n; `answers` matches them), or by one error reply (ACL, CROSSSLOT,
 *             MOVED: the whole command refused). HELLO and PING get one reply.
 *   invariant: a confirmation push or a non-push reply always belongs to the FIFO's head; a push
 *             that does not match it is either an unsolicited `sunsubscribe` (Valkey dropped a
 *             shard channel: slot moved, node demoted — cluster_legacy.c removeChannelsInSlot)
 *             or a desync, and a desync closes the connection (the hub then re-subscribes).
 *   messages: `message` / `pmessage` / `smessage` pushes go to the handler as views of the read
 *             buffer, valid until the handler returns; consecutive ones for one name in one read
 *             go as one run (message-run.ts), handed on before anything else is handled.
 *   outbox  : UNSUBSCRIBEs asked for during one turn (unsubscribeLater) leave together at its end,
 *             and before any SUBSCRIBE sent on this connection meanwhile, so a name released and
 *             wanted again in one turn ends subscribed.
 *   liveness: the oldest pending command may wait timeouts.commandMs while nothing arrives; an
 *             idle connection is PINGed every pingIntervalMs so a black-holed node is noticed
 *             too. A node that keeps sending pushes is alive even if a reply waits behind them
 *             (a fan-out of millions of messages): closing it then would lose messages.
 */
import { performance } from 'node:perf_hooks';
import { encodeCommand } from '../resp/encode.js';
import { UNBOUNDED_NESTING, type FramerLimits } from '../resp/limits.js';
import type { RespoolConfig } from '../config/types.js';
import type { UpstreamTlsConfig } from '../config/tls-config.js';
import type { OpenUpstreamSocket } from '../upstream/upstream-socket.js';
import { NodeConnection } from '../upstream/node-connection.js';
import type { LinkRequest } from '../upstream/link-request.js';
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

/** An (un)subscribe command in the core's FIFO: answered by one confirmation push per name, or an error reply. */
interface SubscribeRequest extends LinkRequest {
  readonly kind: UpstreamSubscribeCommand;
  readonly names: Buffer[];
  /** Next name whose confirmation is expected. */
  index: number;
}

const ERROR = 0x2d; // '-'
const PING = encodeCommand(['PING']);
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

export class SubscriberConnection extends NodeConnection {
  /** UNSUBSCRIBEs to write at the end of this turn, by command (see `outbox` above). */
  private outbox: Map<UpstreamSubscribeCommand, Buffer[]> | null = null;
  /** Names UNSUBSCRIBEd (asked for, or sent) that the node has not confirmed: it still counts them for PUBLISH. */
  private leaving = 0;
  private readonly whenSettled: Array<() => void> = [];
  private tickTimer: NodeJS.Timeout | null = null;
  /** Messages of this read not handed on yet (message-run.ts). */
  private readonly run: MessageRun;

  constructor(
    private readonly subscriberOptions: SubscriberConnectionOptions,
    private readonly handler: SubscriberConnectionHandler,
  ) {
    super({ ...subscriberOptions, protocol: 3, clientName: PUBSUB_CLIENT_NAME });
    this.run = new MessageRun((kind, pattern, channel, frames, starts) => this.handler.message(this, kind, pattern, channel, frames, starts));
    this.onPush = (frame) => this.onOtherPush(frame);
  }

  isClosed(): boolean {
    return this.state === 'closed';
  }

  /** Commands written or queued and not fully answered. */
  get pendingCount(): number {
    return this.inflightCount;
  }

  /** Sends one (un)subscribe command for `names` (at most MAX_NAMES_PER_COMMAND, at least one); UNSUBSCRIBEs queued this turn go first. */
  subscribe(kind: UpstreamSubscribeCommand, names: Buffer[], callbacks: CommandCallbacks): void {
    if (this.outbox !== null) this.flushOutbox();
    if (this.state === 'closed') {
      callbacks.failed(`connection to ${this.address} is closed (${this.closeReason})`, true);
      return;
    }
    const request: SubscribeRequest = {
      kind,
      names,
      index: 0,
      sentAt: 0,
      pushReplies: names.length,
      onReply: (frame) => {
        this.run.flush(); // what arrived before it is handed on first
        if (frame[0] !== ERROR) return callbacks.confirmed(request.index++);
        if (request.index > 0) return this.close(`unexpected reply to ${kind.toUpperCase()}: ${frame.toString('latin1', 0, Math.min(frame.length, 80))}`);
        callbacks.failed(frame.toString('utf8', 1, frame.length - 2), false);
      },
      onLinkFailure: () => callbacks.failed(`connection to upstream ${this.address} was lost (${this.closeReason})`, true),
    };
    this.send(encodeCommand([kind.toUpperCase(), ...names]), request);
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
        this.subscribe(command, batch, {
          confirmed: () => this.left(1),
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

  protected override onReady(): void {
    const tick = Math.max(50, Math.min(1000, Math.floor(this.subscriberOptions.commandTimeoutMs / 4)));
    this.tickTimer = setInterval(() => this.tick(), tick);
    this.tickTimer.unref();
    this.handler.ready(this);
  }

  protected override onClosing(): void {
    this.run.flush(); // what arrived before the close is delivered, as before it
    this.outbox = null;
    this.leaving = 0;
    if (this.tickTimer !== null) clearInterval(this.tickTimer);
    this.tickTimer = null;
  }

  /** After the core failed the pending commands: what waited for UNSUBSCRIBEs runs, then the owner hears of it. */
  protected override onClosed(reason: string): void {
    for (const then of this.whenSettled.splice(0)) then();
    this.handler.closed(this, reason);
  }

  protected override onChunkDone(): void {
    this.run.flush();
  }

  /** The oldest command may wait commandTimeoutMs while nothing arrives; an idle connection is PINGed (see `liveness` above). */
  private tick(): void {
    const now = performance.now();
    const oldest = this.inflight.peek();
    const timeout = this.subscriberOptions.commandTimeoutMs;
    if (oldest !== undefined && now - oldest.sentAt > timeout && now - this.lastBytesAt > timeout) {
      this.close(`no reply within ${timeout} ms`);
      return;
    }
    if (oldest === undefined && now - this.lastWriteAt > this.subscriberOptions.pingIntervalMs) {
      this.send(PING, { sentAt: 0, onReply: () => this.run.flush(), onLinkFailure() {} });
    }
  }

  /** A (un)subscribe command at the FIFO's head is answered by its kind's confirmation of its next name. */
  protected override answers(head: LinkRequest, push: Buffer): boolean {
    const request = head as SubscribeRequest;
    const reader = new PushReader(push);
    if (reader.string() !== request.kind) return false;
    return reader.string() === request.names[request.index]!.toString('latin1');
  }

  /** A push that answers no command: messages (gathered into runs), an unsolicited SUNSUBSCRIBE, or a desync. */
  private onOtherPush(frame: Buffer): void {
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
    if (kind === 'sunsubscribe' && name !== null) {
      this.handler.shardChannelDropped(this, name);
      return;
    }
    const head = this.inflight.peek() as SubscribeRequest | undefined;
    this.close(`unexpected ${kind} push for ${JSON.stringify(name)} (expected ${head?.kind ?? 'nothing'})`);
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
