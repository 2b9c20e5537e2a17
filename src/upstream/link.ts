import { performance } from 'node:perf_hooks';
import { ProxyError } from '../errors.js';
import { NodeConnection, type HandshakeStep, type NodeConnectionOptions } from './node-connection.js';

export { ignoreReply, type LinkFailureCause, type LinkRequest, type ReplySource } from './link-request.js';
export type { LinkState } from './node-connection.js';

export interface LinkOptions extends NodeConnectionOptions {
  /** Replica links send READONLY so the replica serves reads of its slots. */
  readonly: boolean;
  commandTimeoutMs: number;
  /**
   * How long the node may answer nothing while it runs a command that takes its time (SAVE …:
   * NodeHealth.busyWithLongCommand): timeouts.adminCommandMs then, else null (commandTimeoutMs).
   */
  patience?: () => number | null;
}

/**
 * A shared link: one pipelined connection to one node (node-connection.ts) that many clients'
 * requests share, from a NodePool. Its role adds READONLY to the handshake of a replica link, and
 * its policy for a node that stops answering: if the oldest in-flight request waits longer than
 * commandTimeoutMs for the node (since it was written, or since reply bytes last came), replies
 * can no longer be trusted to arrive, so the whole link fails (every in-flight request gets a
 * timeout error) and the pool replaces it. Pushes are dropped (no shared-link feature asks for
 * them); a MONITOR link hands its stream to onStream (client/script-line-relay.ts).
 *
 * Events: 'ready', 'close' (reason: string).
 */
export class Link extends NodeConnection {
  private timeoutTimer: NodeJS.Timeout | null = null;

  constructor(private readonly linkOptions: LinkOptions) {
    super(linkOptions);
  }

  /** A reload changed timeouts.commandMs: the next timeout check uses it. */
  setCommandTimeout(ms: number): void {
    this.linkOptions.commandTimeoutMs = ms;
  }

  protected override handshakeSteps(): HandshakeStep[] {
    const steps = super.handshakeSteps();
    if (this.linkOptions.readonly) steps.push({ args: ['READONLY'] });
    return steps;
  }

  protected override onReady(): void {
    this.checkTimeoutIn(this.tick());
  }

  protected override onClosing(): void {
    if (this.timeoutTimer !== null) clearTimeout(this.timeoutTimer);
    this.timeoutTimer = null;
  }

  /** How often an idle or quiet link is looked at: a quarter of commandTimeoutMs, 50 ms to 1 s. */
  private tick(): number {
    return Math.max(50, Math.min(1000, Math.floor(this.linkOptions.commandTimeoutMs / 4)));
  }

  private checkTimeoutIn(ms: number): void {
    this.timeoutTimer = setTimeout(() => this.checkTimeout(), ms);
    this.timeoutTimer.unref();
  }

  /**
   * The node owes the oldest request its reply from the later of its write and the last reply
   * bytes: a link that sends nothing for commandTimeoutMs is dead, one working through a long
   * queue (a thousand 1 MiB replies take seconds to arrive) is not. Looked at every tick, and
   * once a request is owed, again when its bound runs out: a dead node's requests fail at
   * commandTimeoutMs, not up to a tick later (no timer per request: one per link).
   */
  private checkTimeout(): void {
    this.timeoutTimer = null;
    const oldest = this.inflight.peek();
    if (oldest === undefined) return this.checkTimeoutIn(this.tick());
    const silent = performance.now() - Math.max(oldest.sentAt, this.lastBytesAt);
    const patience = this.linkOptions.patience?.() ?? null;
    const bound = Math.max(this.linkOptions.commandTimeoutMs, patience ?? 0);
    if (silent <= bound) return this.checkTimeoutIn(Math.min(this.tick(), Math.ceil(bound - silent) + 1));
    const waited = patience ?? this.linkOptions.commandTimeoutMs;
    this.fail(ProxyError.timeout(this.address, waited), true);
  }
}
