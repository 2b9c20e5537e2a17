import { Link, type LinkOptions, type LinkRequest } from './link.js';
import type { FramesAround } from './link-request.js';
import { ProxyError } from '../errors.js';
import { FifoQueue } from '../util/fifo-queue.js';
import type { Metrics } from '../metrics/metrics.js';
import type { ShedReason } from '../metrics/metric-definitions.js';
import type { NodeHealth } from './node-health.js';
import type { ProcessLoad } from './process-load.js';

/** The bounds a pool enforces (from config.resilience). */
export interface NodePoolLimits {
  /** How long a request may wait for a link when none is open; 0 = fail at once. */
  queueWindowMs: number;
  maxQueued: number;
  maxQueuedBytes: number;
  maxInflightPerLink: number;
  maxInflightBytesPerLink: number;
}

export interface NodePoolOptions extends Omit<LinkOptions, 'host' | 'port'> {
  /** Interactive links (connectionsPerNode). */
  size: number;
  /** Bulk links after them (admission.bulkConnectionsPerNode; 0: bulk clients share the interactive ones). */
  bulkSize?: number;
  metrics?: Metrics;
  role: 'primary' | 'replica';
  /** Shared by every pool to this node address: circuit, dial budget, retry budget. */
  health: NodeHealth;
  limits: NodePoolLimits;
  load?: ProcessLoad;
  /** timeouts.adminCommandMs: how long a node busy with SAVE, FLUSHALL … may answer nothing (NodeHealth.longCommandSent). */
  adminCommandMs?: number;
}

interface Waiting {
  data: Buffer;
  req: LinkRequest;
  affinity: number;
  deadline: number;
}

/**
 * A link that no longer keeps up with what it carries, so a client placed afresh goes to another
 * (NodePool.placeFor): the kernel has not taken SPILL_BYTES of what was written to it, a reply
 * of more than SPILL_BYTES is still arriving (the requests behind it wait for it: head-of-line),
 * or half of the link's in-flight bound is used. Not latency: a node that answers slowly because
 * it is busy gets no faster over more connections, only busier.
 */
const SPILL_BYTES = 256 * 1024;
function backedUp(link: Link, limits: NodePoolLimits): boolean {
  return link.unsentBytes > SPILL_BYTES || link.pendingReplyBytes > SPILL_BYTES || link.inflightCount * 2 > limits.maxInflightPerLink;
}

/**
 * A fixed number of pipelined links to one node for one protocol (and database), shared by
 * every client.
 * The pool never holds more than `size` + `bulkSize` links, whatever the number of clients: that
 * is the point of respool. A client's requests go to its place (`affinity`: placeFor's choice,
 * which keeps every client on the first link of its lane until that link is backed up) while that
 * link is usable — Valkey runs one connection's commands in order, so a client's pipelined SET
 * then GET must travel on one link; requests without affinity go to the open interactive link
 * with the fewest outstanding requests.
 *
 *   lanes   : places [0, size) are the interactive links, [size, size + bulkSize) the bulk links
 *             (client/lane-class.ts: deep pipelines, big replies, slow readers), so an
 *             interactive client's reply never queues behind a bulk client's on one link
 *   links   : `size` + `bulkSize` places; an empty or closed place is dialed when a request is placed on it,
 *             so a second link opens only when the first is backed up; when the node's
 *             circuit allows a dial (NodeHealth: free while healthy; after a failure one probe
 *             at a time, backoff-spaced and budgeted per node address)
 *   waiting : requests that arrived while no link was open, oldest first, each with a deadline
 *             now + queueWindowMs; sent when a link opens, failed with an error naming the node
 *             at the deadline — never parked without bound. While anything waits, new requests
 *             wait behind it (one FIFO), so no client's requests overtake each other.
 *   bounds  : waiting ≤ maxQueued requests and maxQueuedBytes; per link ≤ maxInflightPerLink
 *             requests and maxInflightBytesPerLink; process-wide ProcessLoad. Past a bound the
 *             request is shed with an error reply (not retried).
 */
export class NodePool {
  readonly address: string;
  private readonly links: Array<Link | null>;
  private readonly waiting = new FifoQueue<Waiting>();
  private waitingBytes = 0;
  private waitTimer: NodeJS.Timeout | null = null;
  private lastError = 'not connected yet';
  /** Requests offered so far (an identity pool is closed when this stops moving: upstream-pools.ts). */
  sent = 0;
  private closed = false;
  private readonly health: NodeHealth;
  private readonly limits: NodePoolLimits;

  /** Interactive places: [0, size); bulk places: [size, links.length). */
  private readonly size: number;

  constructor(
    readonly host: string,
    readonly port: number,
    private readonly options: NodePoolOptions,
  ) {
    this.address = `${host}:${port}`;
    this.size = options.size;
    this.links = new Array<Link | null>(options.size + (options.bulkSize ?? 0)).fill(null);
    this.health = options.health;
    this.limits = options.limits;
  }

  /** Links currently open (ready). */
  get openLinks(): number {
    let n = 0;
    for (const link of this.links) if (link?.state === 'ready') n++;
    return n;
  }

  /** A reload changed timeouts: new links dial with them, open links time out by the new command timeout. */
  setTimeouts(connectMs: number, commandMs: number, adminCommandMs?: number): void {
    this.options.connectTimeoutMs = connectMs;
    this.options.commandTimeoutMs = commandMs;
    if (adminCommandMs !== undefined) this.options.adminCommandMs = adminCommandMs;
    for (const link of this.links) link?.setCommandTimeout(commandMs);
  }

  /** Requests waiting for a link. */
  get waitingCount(): number {
    return this.waiting.length;
  }

  /** Bytes its links hold in memory: replies still arriving, requests the kernel has not taken, requests waiting for a link. */
  bufferedBytes(): number {
    let n = this.waitingBytes;
    for (const link of this.links) if (link !== null) n += link.pendingReplyBytes + link.unsentBytes;
    return n;
  }

  /** Requests in flight on its interactive links and on its bulk links (respool_upstream_link_inflight_requests). */
  inflightByLane(): { interactive: number; bulk: number } {
    let interactive = 0;
    let bulk = 0;
    for (let i = 0; i < this.links.length; i++) {
      const n = this.links[i]?.inflightCount ?? 0;
      if (i < this.size) interactive += n;
      else bulk += n;
    }
    return { interactive, bulk };
  }

  get isClosed(): boolean {
    return this.closed;
  }

  /** Nothing waiting and nothing in flight on any link. */
  isQuiet(): boolean {
    if (this.waiting.length > 0) return false;
    for (const link of this.links) if (link !== null && link.inflightCount > 0) return false;
    return true;
  }

  get protocol(): 2 | 3 {
    return this.options.protocol;
  }

  /** The database its links serve (SELECT in their handshake when ≠ 0). */
  get db(): number {
    return this.options.db ?? 0;
  }

  /**
   * Sends one request (its one reply goes to `req`). `affinity` (the client's id, -1 for none)
   * pins a client to one link of the pool so that its commands execute in the order it sent them.
   * `around`: two requests to write right before and right after it on the same link, in one
   * write, when a link (open with room, or connecting) can take all three now; otherwise the
   * request goes alone, and `around`'s last request is told it was not sent.
   */
  send(data: Buffer, req: LinkRequest, affinity = -1, around: FramesAround | null = null): void {
    if (around !== null && this.sendBetween(data, req, around, affinity)) return;
    around?.after.req.onLinkFailure('not sent beside the request', false);
    this.sent++;
    this.health.retryBudget.deposit();
    const link = this.waiting.length === 0 ? this.pick(affinity) : null;
    if (link !== null) this.sendOn(link, data, req);
    else this.wait(data, req, affinity);
  }

  /** send() with `around`: the three on one link when it can take them now; false when it cannot (nothing sent). */
  private sendBetween(data: Buffer, req: LinkRequest, around: FramesAround, affinity: number): boolean {
    // A link still connecting takes the three in order too (its first write carries them).
    const link = this.waiting.length === 0 ? this.linkOrConnecting(affinity) : null;
    if (link === null || (link.state !== 'connecting' && !this.hasRoom(link, data.length + around.before.data.length + around.after.data.length, 3))) return false;
    this.sent++;
    this.health.retryBudget.deposit();
    link.send(around.before.data, around.before.req);
    link.send(data, req);
    link.send(around.after.data, around.after.req);
    return true;
  }

  /**
   * Sends `count` requests written one after the other in `data`, all answered to `req` in
   * order (a split command's parts for this node, routing/split-command.ts), on the link
   * `affinity` picks. Only when that link is open and has room for all of them and nothing waits
   * for a link; false otherwise, with nothing sent (the caller sends them one by one, so they
   * queue and are bounded as any request is).
   */
  sendParts(data: Buffer, req: LinkRequest, count: number, affinity: number): boolean {
    if (this.waiting.length > 0) return false;
    const link = this.pick(affinity);
    if (link === null || link.state !== 'ready' || !this.hasRoom(link, data.length, count)) return false;
    this.sent += count;
    const budget = this.health.retryBudget;
    for (let i = 0; i < count; i++) budget.deposit();
    link.sendMany(data, req, count);
    return true;
  }

  /**
   * Sends requests back to back on one link, in one write, so nothing can interleave (ASKING +
   * the command; MULTI … EXEC). A link still connecting takes them in order too. When no link is
   * open or the link has no room, every one fails unsent (the caller may retry).
   */
  sendBlock(items: ReadonlyArray<{ data: Buffer; req: LinkRequest }>, affinity = -1): void {
    this.sent++;
    const link = this.linkOrConnecting(affinity);
    let size = 0;
    for (const item of items) size += item.data.length;
    if (link !== null && (link.state === 'connecting' || this.hasRoom(link, size))) {
      for (const { data, req } of items) link.send(data, req);
      return;
    }
    // Rare (a redirect to a node with no open link, a full link): fail them all, unsent.
    const error = link === null ? this.unavailable() : ProxyError.shed(this.address, 'too many requests in flight on its links');
    const cause = link !== null ? 'shed' : undefined;
    for (const { req } of items) req.onLinkFailure(error, false, cause);
  }

  /** Control plane: one command, its reply frame (copied). Rejects with the link error. */
  call(args: ReadonlyArray<string | Buffer | number>): Promise<Buffer> {
    // A link still connecting queues the call itself (bounded by the connect timeout).
    const link = this.linkOrConnecting(-1);
    if (link === null) return Promise.reject(new Error(this.unavailable()));
    return link.call(args);
  }

  /** The link `affinity` picks, else one still connecting (it queues what it is given, in order); null when there is neither. */
  private linkOrConnecting(affinity: number): Link | null {
    return this.pick(affinity) ?? this.links.find((l) => l?.state === 'connecting') ?? null;
  }

  /**
   * Resolves once every request sent on this pool before the call has been answered or failed:
   * a PING behind them on each link (a link runs its requests in order). Requests still waiting
   * for a link are waited for too (they leave within queueWindowMs). Fleet copy fills use it to
   * know that no write sent before a split was known is still on its way.
   */
  async barrier(): Promise<void> {
    const waits: Array<Promise<unknown>> = [];
    for (const link of this.links) if (link !== null && link.state !== 'closed') waits.push(link.call(['PING']).catch(() => undefined));
    if (this.waiting.length > 0) waits.push(new Promise((r) => setTimeout(r, this.limits.queueWindowMs + 1)));
    await Promise.all(waits);
  }

  close(): void {
    this.closed = true;
    for (let i = 0; i < this.links.length; i++) {
      this.links[i]?.close('pool closed');
      this.links[i] = null;
    }
    this.expireWaiting(Infinity, ProxyError.upstreamUnavailable(this.address, 'pool closed'));
  }

  private sendOn(link: Link, data: Buffer, req: LinkRequest): void {
    if (!this.hasRoom(link, data.length)) {
      const load = this.options.load;
      const processFull = load !== undefined && load.full(data.length);
      this.shed(processFull ? 'process_inflight' : 'link_inflight', req, processFull
        ? ProxyError.shed(this.address, 'respool has too many requests in flight')
        : ProxyError.shed(this.address, 'too many requests in flight on its links'));
      return;
    }
    link.send(data, req);
  }

  private hasRoom(link: Link, size: number, count = 1): boolean {
    const { limits } = this;
    if (link.inflightCount + count > limits.maxInflightPerLink) return false;
    if (link.inflightBytes + size > limits.maxInflightBytesPerLink && link.inflightCount > 0) return false;
    const load = this.options.load;
    return load === undefined || !load.full(size);
  }

  private shed(reason: ShedReason, req: LinkRequest, error: string): void {
    this.options.metrics?.raw.requests_shed_total.labels(reason).inc();
    this.health.onShed(reason, error);
    req.onLinkFailure(error, false, 'shed');
  }

  private unavailable(): string {
    const { circuit } = this.health;
    const cause = circuit.isOpen
      ? `${circuit.lastError || this.lastError}; circuit open after ${circuit.consecutiveFailures} consecutive failures`
      : this.lastError;
    return ProxyError.upstreamUnavailable(this.address, cause);
  }

  /** No open link: wait (bounded, with a deadline) for one to open. */
  private wait(data: Buffer, req: LinkRequest, affinity: number): void {
    const { limits } = this;
    if (this.closed || limits.queueWindowMs <= 0) {
      this.shed('node_down', req, this.unavailable());
      return;
    }
    if (this.waiting.length >= limits.maxQueued || this.waitingBytes + data.length > limits.maxQueuedBytes) {
      this.shed('node_queue', req, ProxyError.shed(this.address, 'too many requests waiting for a connection'));
      return;
    }
    this.waiting.push({ data, req, affinity, deadline: Date.now() + limits.queueWindowMs });
    this.waitingBytes += data.length;
    // Nothing was picked because others wait: a link may be open now (flush in order).
    if (this.waiting.length > 1 && this.openLinks > 0) this.flushWaiting();
    if (this.waitTimer === null) this.armWaitTimer();
  }

  private armWaitTimer(): void {
    const head = this.waiting.peek();
    if (head === undefined) return;
    this.waitTimer = setTimeout(() => {
      this.waitTimer = null;
      // A dial may have become allowed meanwhile (backoff elapsed): try before giving up.
      if (this.pick(-1) !== null) this.flushWaiting();
      this.expireWaiting(Date.now(), null);
      this.armWaitTimer();
    }, Math.max(1, head.deadline - Date.now()));
    this.waitTimer.unref();
  }

  /** Fails waiting requests whose deadline is ≤ now (not written: the router may retry elsewhere). */
  private expireWaiting(now: number, error: string | null): void {
    let head = this.waiting.peek();
    while (head !== undefined && head.deadline <= now) {
      this.waiting.shift();
      this.waitingBytes -= head.data.length;
      this.options.metrics?.raw.requests_shed_total.labels('node_down').inc();
      const why = error ?? this.unavailable();
      this.health.onShed('node_down', why);
      head.req.onLinkFailure(why, false);
      head = this.waiting.peek();
    }
    if (this.waiting.length === 0 && this.waitTimer !== null) {
      clearTimeout(this.waitTimer);
      this.waitTimer = null;
    }
  }

  /** A link opened: send what waited, in order. */
  private flushWaiting(): void {
    while (this.waiting.length > 0) {
      const entry = this.waiting.peek()!;
      const link = this.pick(entry.affinity);
      if (link === null) return;
      this.waiting.shift();
      this.waitingBytes -= entry.data.length;
      this.sendOn(link, entry.data, entry.req);
    }
    if (this.waitTimer !== null) {
      clearTimeout(this.waitTimer);
      this.waitTimer = null;
    }
  }

  /**
   * The client's own link (affinity ≥ 0) when it is open, or once some interactive link is open and
   * its own is usable (a link still connecting queues the request itself, in order), else the
   * ready interactive link with the least outstanding work; null when none is open. Refills empty
   * places when the circuit allows.
   */
  private pick(affinity: number): Link | null {
    if (this.closed) return null;
    const size = this.size;
    // Only the place asked for is (re)dialed: further links open when placeFor spills onto them.
    const want = affinity < 0 ? 0 : affinity < this.links.length ? affinity : affinity % size;
    let own = this.links[want] ?? null;
    if (own === null || own.state === 'closed') own = this.refill(want);
    let best: Link | null = null;
    for (let i = 0; i < size; i++) {
      const link = this.links[i];
      if (link == null || link.state !== 'ready') continue;
      if (best === null || link.inflightCount < best.inflightCount) best = link;
    }
    if (affinity >= 0 && own !== null && (own.state === 'ready' || (best !== null && own.state !== 'closed'))) return own;
    return best;
  }

  /**
   * The place (link index) of a client's next request to this node. While the client has other
   * requests outstanding it keeps its place: Valkey runs one connection's commands in order and
   * a link answers in order, so a pipelined SET then GET must share a link (the place is the
   * client's, shared by every node it talks to: it changes only when nothing is outstanding
   * anywhere). A client with nothing outstanding goes to the first place whose link keeps up —
   * so that at any ordinary load every client shares ONE link per node and the node reads and
   * writes many requests per system call — and onto a further place, opened then, only when
   * the links before it are backed up (backedUp). A caller that is not a client session (no
   * `pending`) keeps its id as its place.
   */
  placeFor(client: { readonly id: number; linkPlace?: number; readonly pending?: number; readonly bulk?: boolean }): number {
    const pending = client.pending;
    if (pending === undefined) return client.id % this.size;
    const place = client.linkPlace ?? -1;
    if (pending > 1 && place >= 0) return place;
    const links = this.links;
    // Its lane (client/lane-class.ts): the bulk places when it is bulk and the pool has any.
    const bulk = links.length > this.size && client.bulk === true;
    const from = bulk ? this.size : 0;
    const to = bulk ? links.length : this.size;
    let next = -1;
    let least = Infinity;
    for (let i = from; i < to; i++) {
      const link = links[i];
      if (link == null || link.state !== 'ready' || !backedUp(link, this.limits)) {
        next = i;
        break;
      }
      if (link.inflightCount < least) {
        least = link.inflightCount;
        next = i;
      }
    }
    client.linkPlace = next;
    return next;
  }

  private refill(index: number): Link | null {
    this.links[index] = null;
    const { circuit } = this.health;
    if (!circuit.tryAcquireDial()) return null;
    const { size: _size, metrics, role, health: _health, limits: _limits, ...linkOptions } = this.options;
    const link = new Link({ ...linkOptions, host: this.host, port: this.port, patience: () => (this.health.busyWithLongCommand() ? this.options.adminCommandMs ?? null : null) });
    const protocol = this.options.protocol === 3 ? 'resp3' : 'resp2';
    this.links[index] = link;
    link.once('ready', () => {
      circuit.onDialSuccess();
      metrics?.upstreamLinksGauge(this.address, protocol, role).inc();
      metrics?.linkConnectCounter(this.address, 'ok').inc();
      if (this.closed) return;
      this.flushWaiting();
    });
    link.once('close', (reason: string) => {
      if (this.links[index] === link) this.links[index] = null;
      this.lastError = reason;
      if (link.wasReady) {
        metrics?.upstreamLinksGauge(this.address, protocol, role).dec();
        if (this.closed || reason === 'pool closed') return;
        if (link.timedOut) circuit.onCommandTimeout(`no reply within ${this.options.commandTimeoutMs} ms`);
        else circuit.onLinkLost(reason);
      } else {
        metrics?.linkConnectCounter(this.address, reason.includes('timeout') ? 'timeout' : 'failed').inc();
        circuit.onDialFailure(reason);
        // The requests waiting were waiting for this dial: with no other link coming, fail them now.
        if (!this.closed && !this.links.some((l) => l !== null && l.state !== 'closed')) this.expireWaiting(Infinity, null);
      }
    });
    return link;
  }
}
