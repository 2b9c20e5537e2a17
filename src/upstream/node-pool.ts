import { Link, type LinkOptions, type LinkRequest } from './link.js';
import { Backoff } from './backoff.js';
import { ProxyError } from '../errors.js';
import type { Metrics } from '../admin/metrics.js';

export interface NodePoolOptions extends Omit<LinkOptions, 'host' | 'port'> {
  size: number;
  metrics?: Metrics;
  role: 'primary' | 'replica';
}

/**
 * A fixed number of pipelined links to one node for one protocol, shared by every client.
 * The pool never holds more than `size` links, whatever the number of clients: that is the
 * point of respool. Requests go to the open link with the fewest outstanding requests.
 *
 * A closed link's place is refilled on demand, no earlier than the jittered backoff after the
 * last failed connect; meanwhile requests go to the other links, or fail at once with a clear
 * error when none is open (never parked without bound).
 */
export class NodePool {
  readonly address: string;
  private readonly links: Array<Link | null>;
  private readonly backoff = new Backoff();
  private nextConnectAt = 0;
  private lastError = 'not connected yet';
  private closed = false;

  constructor(
    readonly host: string,
    readonly port: number,
    private readonly options: NodePoolOptions,
  ) {
    this.address = `${host}:${port}`;
    this.links = new Array<Link | null>(options.size).fill(null);
  }

  /** Links currently open (ready). */
  get openLinks(): number {
    let n = 0;
    for (const link of this.links) if (link?.state === 'ready') n++;
    return n;
  }

  get isClosed(): boolean {
    return this.closed;
  }

  get protocol(): 2 | 3 {
    return this.options.protocol;
  }

  /**
   * `affinity` (the client's id) pins a client to one link of the pool: Valkey runs one
   * connection's commands in order, so a client's pipelined SET then GET must travel on the
   * same link to execute in the order it sent them.
   */
  send(data: Buffer, req: LinkRequest, affinity = -1): void {
    const link = this.pick(affinity);
    if (link) link.send(data, req);
    else req.onLinkFailure(ProxyError.upstreamUnavailable(this.address, this.lastError), false);
  }

  /** Sends two requests back to back on the same link (ASKING + the command). */
  sendPair(first: Buffer, firstReq: LinkRequest, second: Buffer, secondReq: LinkRequest, affinity = -1): void {
    const link = this.pick(affinity);
    if (link) {
      link.send(first, firstReq);
      link.send(second, secondReq);
    } else {
      const error = ProxyError.upstreamUnavailable(this.address, this.lastError);
      firstReq.onLinkFailure(error, false);
      secondReq.onLinkFailure(error, false);
    }
  }

  /** Control plane: one command, its reply frame (copied). Rejects with the link error. */
  call(args: ReadonlyArray<string | Buffer | number>): Promise<Buffer> {
    const link = this.pick(-1);
    if (!link) return Promise.reject(new Error(ProxyError.upstreamUnavailable(this.address, this.lastError)));
    return link.call(args);
  }

  close(): void {
    this.closed = true;
    for (let i = 0; i < this.links.length; i++) {
      this.links[i]?.close('pool closed');
      this.links[i] = null;
    }
  }

  /**
   * The client's own link (affinity ≥ 0) when it is usable, else the usable link with the least
   * outstanding work. Refills empty places when the backoff allows, so the pool keeps its size.
   */
  private pick(affinity: number): Link | null {
    if (this.closed) return null;
    let best: Link | null = null;
    const size = this.links.length;
    for (let i = 0; i < size; i++) {
      let link: Link | null = this.links[i] ?? null;
      if (link === null || link.state === 'closed') link = this.refill(i);
      if (link === null) continue;
      if (best === null || link.inflightCount < best.inflightCount) best = link;
    }
    if (affinity >= 0) {
      const own = this.links[affinity % size];
      if (own && own.state !== 'closed') return own;
    }
    return best;
  }

  private refill(index: number): Link | null {
    this.links[index] = null;
    const now = Date.now();
    if (now < this.nextConnectAt) return null;
    // One connect attempt at a time after a failure: the others wait for its outcome.
    if (this.backoff.consecutiveFailures > 0) this.nextConnectAt = now + 60_000;
    const { size: _size, metrics, role, ...linkOptions } = this.options;
    const link = new Link({ ...linkOptions, host: this.host, port: this.port });
    const protocol = this.options.protocol === 3 ? 'resp3' : 'resp2';
    this.links[index] = link;
    link.once('ready', () => {
      this.backoff.reset();
      this.nextConnectAt = 0;
      metrics?.upstreamLinksGauge(this.address, protocol, role).inc();
      metrics?.linkConnectCounter(this.address, 'ok').inc();
    });
    link.once('close', (reason: string) => {
      if (this.links[index] === link) this.links[index] = null;
      this.lastError = reason;
      if (link.wasReady) {
        metrics?.upstreamLinksGauge(this.address, protocol, role).dec();
      } else {
        metrics?.linkConnectCounter(this.address, reason.includes('timeout') ? 'timeout' : 'failed').inc();
        if (!this.closed) this.nextConnectAt = Date.now() + this.backoff.nextDelayMs();
      }
    });
    return link;
  }
}
