import calculateSlot from 'cluster-key-slot';
import type { Logger } from 'pino';
import { performance } from 'node:perf_hooks';
import type { CommandSpec } from '../commands/command-table.js';
import type { CommandTable } from '../commands/command-table.js';
import type { TopologyRefresher } from '../cluster/topology-refresher.js';
import type { ClusterNode, Topology } from '../cluster/topology.js';
import type { UpstreamPools } from '../upstream/upstream-pools.js';
import type { Link, LinkRequest } from '../upstream/link.js';
import type { Metrics } from '../admin/metrics.js';
import { encodeCommand, encodeError } from '../resp/encode.js';
import { ProxyError } from '../errors.js';
import { ProxyRequest, type ReplySink } from './proxy-request.js';
import { parseRedirect, errorLine } from './redirect.js';

export interface RouterOptions {
  maxRedirects: number;
  retryBudget: number;
  retryBaseMs: number;
  retryMaxMs: number;
}

const ASKING = encodeCommand(['ASKING']);
/** The ASKING reply (+OK) is consumed here; a failure surfaces on the command that follows. */
const IGNORE_REPLY: LinkRequest = { sentAt: 0, onReply() {}, onLinkFailure() {} };

/**
 * Decides which node gets each forwarded command, and what happens when a node says
 * "not here" (MOVED/ASK), "not now" (TRYAGAIN/CLUSTERDOWN/LOADING) or its link fails.
 *
 * Plans: keyed → the primary owning the keys' slot (keys in different slots: CROSSSLOT);
 * keyless → any primary, round-robin. Every redirect and retry is counted against per-request
 * caps; retries wait a jittered, capped delay; only replies that prove the command did not run
 * (or links that never wrote it) are retried.
 */
export class Router {
  private roundRobin = 0;

  constructor(
    private readonly refresher: TopologyRefresher,
    private readonly pools: UpstreamPools,
    private readonly options: RouterOptions,
    private readonly log: Logger,
    private readonly metrics?: Metrics,
  ) {}

  /**
   * Forwards one command. Returns an error reply when it cannot be planned (the caller queues
   * it in order), or null when a ProxyRequest is on its way and will finish by itself.
   */
  forward(sink: ReplySink, raw: Buffer, args: Buffer[], spec: CommandSpec | undefined, table: CommandTable, command: string): ProxyRequest | Buffer {
    const topology = this.refresher.current;
    if (topology === null) return encodeError(ProxyError.topologyUnknown());
    let slot = -1;
    if (topology.mode === 'cluster' && spec !== undefined) {
      const keys = table.keyIndexes(spec, args);
      if (keys.length > 0) {
        slot = calculateSlot(args[keys[0]!]!);
        for (let i = 1; i < keys.length; i++) {
          if (calculateSlot(args[keys[i]!]!) !== slot) return encodeError(ProxyError.crossSlot());
        }
      }
    }
    const req = new ProxyRequest(sink, this, raw, command, slot);
    this.metrics?.commandCounter(command).inc();
    const error = this.send(req, topology);
    return error ?? req;
  }

  /** Sends (or re-sends) a request to the node its slot maps to now. Error text when it cannot. */
  private send(req: ProxyRequest, topology: Topology): Buffer | null {
    const node = this.nodeFor(req.slot, topology);
    if (node === undefined) return encodeError(ProxyError.slotNotServed(req.slot));
    req.node = node.address;
    this.pools.forNode(node, req.sink.protocol, 'primary').send(req.raw, req, req.sink.id);
    return null;
  }

  private nodeFor(slot: number, topology: Topology): ClusterNode | undefined {
    if (slot >= 0) return topology.primaryForSlot(slot);
    const primaries = topology.shards;
    if (primaries.length === 0) return undefined;
    this.roundRobin = (this.roundRobin + 1) % primaries.length;
    return primaries[this.roundRobin]!.primary;
  }

  /** Called for every error reply; true when the router took the request over (redirect/retry). */
  handleErrorReply(req: ProxyRequest, frame: Buffer, link: Link): boolean {
    const redirect = parseRedirect(frame);
    if (redirect === null) return false;
    if (redirect.kind === 'moved' || redirect.kind === 'ask') {
      this.metrics?.redirectCounter(redirect.kind).inc();
      if (++req.redirects > this.options.maxRedirects) {
        this.metrics?.commandErrorCounter(req.command, 'redirect_limit').inc();
        req.finish(encodeError(ProxyError.tooManyRedirects(req.command.toUpperCase(), this.options.maxRedirects)));
        return true;
      }
      // "MOVED 3999 :6381" (empty host) means the replying node's own host.
      const host = redirect.host || link.address.slice(0, link.address.lastIndexOf(':'));
      if (redirect.kind === 'moved') {
        const current = this.refresher.current;
        if (current) this.refresher.install(current.withSlotOwner(redirect.slot, host, redirect.port));
        this.refresher.requestRefresh('moved');
        req.slot = redirect.slot;
        const error = this.send(req, this.refresher.current!);
        if (error) req.finish(error);
      } else {
        req.node = `${host}:${redirect.port}`;
        this.pools.get(host, redirect.port, req.sink.protocol, 'primary').sendPair(ASKING, IGNORE_REPLY, req.raw, req, req.sink.id);
      }
      return true;
    }
    // TRYAGAIN / CLUSTERDOWN / LOADING: the command did not run; retry within budget.
    if (req.retries >= this.options.retryBudget) return false; // the client sees the server's error
    this.metrics?.retryCounter(redirect.kind).inc();
    if (redirect.kind === 'clusterdown') this.refresher.requestRefresh('error');
    this.retryLater(req, errorLine(frame));
    return true;
  }

  /** A link failed under the request. Unwritten requests may be retried; written ones never. */
  handleLinkFailure(req: ProxyRequest, error: string, written: boolean): void {
    this.refresher.requestRefresh('error');
    if (written || req.retries >= this.options.retryBudget) {
      this.metrics?.commandErrorCounter(req.command, error.includes('did not answer') ? 'timeout' : 'proxy').inc();
      req.finish(encodeError(error));
      return;
    }
    this.metrics?.retryCounter('connection').inc();
    this.retryLater(req, error);
  }

  observeReply(req: ProxyRequest, isError: boolean): void {
    if (this.metrics === undefined) return;
    this.metrics.latencyHistogram(req.node).observe((performance.now() - req.sentAt) / 1000);
    if (isError) this.metrics.commandErrorCounter(req.command, 'server').inc();
  }

  private retryLater(req: ProxyRequest, lastError: string): void {
    const ceiling = Math.min(this.options.retryMaxMs, this.options.retryBaseMs * 2 ** req.retries);
    req.retries++;
    const delay = Math.floor(Math.random() * ceiling);
    setTimeout(() => {
      if (req.sink.closed) return req.finish(encodeError(lastError));
      const topology = this.refresher.current;
      const error = topology ? this.send(req, topology) : encodeError(ProxyError.topologyUnknown());
      if (error) req.finish(encodeError(ProxyError.retriesExhausted(req.command.toUpperCase(), lastError)));
    }, delay);
  }
}
