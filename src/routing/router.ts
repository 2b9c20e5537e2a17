import calculateSlot from 'cluster-key-slot';
import type { Logger } from 'pino';
import { performance } from 'node:perf_hooks';
import type { CommandSpec } from '../commands/command-table.js';
import type { CommandTable } from '../commands/command-table.js';
import type { TopologyRefresher } from '../cluster/topology-refresher.js';
import type { ClusterNode, Shard, Topology } from '../cluster/topology.js';
import type { UpstreamPools } from '../upstream/upstream-pools.js';
import type { Link, LinkFailureCause, LinkRequest } from '../upstream/link.js';
import type { Metrics } from '../admin/metrics.js';
import { encodeCommand, encodeError } from '../resp/encode.js';
import { ProxyError } from '../errors.js';
import { ProxyRequest, type ReplySink } from './proxy-request.js';
import { parseRedirect, errorLine } from './redirect.js';
import type { HotKeys } from '../hotkeys/hot-keys.js';
import { CommandFlag } from '../commands/command-flags.js';
import type { ReadRouting } from './read-strategy.js';
import { fullJitterDelay } from '../upstream/backoff.js';
import { ClusterScan, FanOut, fanOutTargets } from './fan-out.js';
import { responsePolicy } from '../commands/proxy-handling.js';
import type { ReplyEntry } from './proxy-request.js';

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
  /** Set by HotKeys while detection or split keys are active (src/hotkeys/hot-keys.ts). */
  hotKeys: HotKeys | null = null;
  /** The hot-key manager even while idle (RESPOOL command, admin). */
  hotKeysControl: HotKeys | null = null;

  constructor(
    private readonly refresher: TopologyRefresher,
    private readonly pools: UpstreamPools,
    private readonly options: RouterOptions,
    private readonly log: Logger,
    private readonly metrics?: Metrics,
    /** Read strategies (read-strategy.ts); undefined or inactive: every command to the primary. */
    private readonly reads?: ReadRouting,
  ) {}

  /**
   * Forwards one command. Returns an error reply when it cannot be planned (the caller queues
   * it in order), or null when a ProxyRequest is on its way and will finish by itself.
   */
  forward(sink: ReplySink, raw: Buffer, args: Buffer[], spec: CommandSpec | undefined, table: CommandTable, command: string): ProxyRequest | Buffer {
    const topology = this.refresher.current;
    if (topology === null) return encodeError(ProxyError.topologyUnknown());
    let slot = -1;
    let firstKey: Buffer | undefined;
    if (topology.mode === 'cluster' && spec !== undefined) {
      const keys = table.keyIndexes(spec, args);
      if (keys.length > 0) {
        firstKey = args[keys[0]!]!;
        slot = calculateSlot(firstKey);
        for (let i = 1; i < keys.length; i++) {
          if (calculateSlot(args[keys[i]!]!) !== slot) return encodeError(ProxyError.crossSlot());
        }
        // Hot keys (src/hotkeys): sampling and split-key rewrite; null while the feature is idle.
        const hotKeys = this.hotKeys;
        if (hotKeys !== null) {
          const routed = hotKeys.route(sink, raw, args, spec, keys, slot, command);
          if (routed !== null) {
            this.metrics?.commandCounter(command).inc();
            return routed;
          }
        }
      }
    }
    const req = new ProxyRequest(sink, this, raw, command, slot);
    if (spec !== undefined && (spec.flags & CommandFlag.READONLY) !== 0) req.safeToRepeat = true;
    // Read-only commands in a cluster follow the read strategy; everything else the primary.
    const reads = this.reads;
    if (reads !== undefined && reads.active && spec !== undefined && (spec.flags & CommandFlag.READONLY) !== 0 && topology.mode === 'cluster') {
      req.read = reads.strategyFor(firstKey);
    }
    this.metrics?.commandCounter(command).inc();
    const error = this.send(req, topology);
    return error ?? req;
  }

  /**
   * A command that speaks for the whole data set (DBSIZE, KEYS, FLUSHALL, SCAN, …) in cluster
   * mode: to every primary (or every node), replies merged (fan-out.ts). An error reply when it
   * cannot start.
   */
  fanOut(sink: ReplySink, raw: Buffer, args: Buffer[], spec: CommandSpec, command: string): ReplyEntry | Buffer {
    const topology = this.refresher.current;
    if (topology === null) return encodeError(ProxyError.topologyUnknown());
    this.metrics?.commandCounter(command).inc();
    if (command === 'scan') {
      const scan = new ClusterScan(sink, topology, this.pools, args);
      return scan.start() ?? scan;
    }
    return new FanOut(sink, command, responsePolicy(spec), fanOutTargets(spec, topology), raw, this.pools);
  }

  /** Sends a request built elsewhere (hot-key copies) to its slot's node; finishes it on failure. */
  dispatch(req: ProxyRequest): void {
    const topology = this.refresher.current;
    const error = topology ? this.send(req, topology) : encodeError(ProxyError.topologyUnknown());
    if (error) req.finish(error);
  }

  /** Sends (or re-sends) a request to the node its slot maps to now. Error text when it cannot. */
  private send(req: ProxyRequest, topology: Topology): Buffer | null {
    if (req.read !== null) return this.sendRead(req, topology);
    const node = this.nodeFor(req.slot, topology);
    if (node === undefined) return encodeError(ProxyError.slotNotServed(req.slot));
    req.node = node.address;
    this.pools.forNode(node, req.sink.protocol, 'primary').send(req.raw, req, req.sink.id);
    return null;
  }

  /** A read under a strategy: the strategy's first usable choice for the slot's shard. */
  private sendRead(req: ProxyRequest, topology: Topology): Buffer | null {
    let shard: Shard | undefined;
    if (req.slot >= 0) {
      shard = topology.shardForSlot(req.slot);
    } else if (topology.shards.length > 0) {
      this.roundRobin = (this.roundRobin + 1) % topology.shards.length;
      shard = topology.shards[this.roundRobin];
    }
    if (shard === undefined) return encodeError(ProxyError.slotNotServed(req.slot));
    const choice = this.reads!.choose(shard, req.read!, req.avoid);
    req.readChoice = choice;
    req.node = choice.node.address;
    this.pools.forNode(choice.node, req.sink.protocol, choice.role).send(req.raw, req);
    return null;
  }

  /**
   * A replica could not serve a read (MOVED: not its slot any more; LOADING; link failure):
   * try the strategy's next choice now. Safe even if the command ran: it is read-only. Bounded:
   * each step adds the replica to the request's avoid list, and the primary ends every order.
   */
  private readFallback(req: ProxyRequest, address: string, reason: 'moved' | 'loading' | 'connection'): void {
    (req.avoid ??= []).push(address);
    if (reason === 'moved') {
      this.metrics?.redirectCounter('moved').inc();
      this.refresher.requestRefresh('moved');
      if (++req.redirects > this.options.maxRedirects) {
        this.metrics?.commandErrorCounter(req.command, 'redirect_limit').inc();
        req.finish(encodeError(ProxyError.tooManyRedirects(req.command.toUpperCase(), this.options.maxRedirects)));
        return;
      }
    } else {
      this.reads!.markFailed(address);
      this.metrics?.retryCounter(reason).inc();
      if (reason === 'connection') this.refresher.requestRefresh('error');
    }
    const topology = this.refresher.current;
    const error = topology ? this.send(req, topology) : encodeError(ProxyError.topologyUnknown());
    if (error) req.finish(error);
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
    if (req.readChoice !== null && req.readChoice.role === 'replica' && (redirect.kind === 'moved' || redirect.kind === 'loading')) {
      this.readFallback(req, req.readChoice.node.address, redirect.kind);
      return true;
    }
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
        if (current) this.refresher.install(current.withSlotOwner(redirect.slot, host, redirect.port), 'moved');
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
    // TRYAGAIN / CLUSTERDOWN / LOADING: the command did not run; retry within the request's
    // cap and the node's retry budget (resilience.retryBudgetPercent), else the client sees the
    // server's error.
    if (req.retries >= this.options.retryBudget) return false;
    if (!this.pools.health(req.node).tryRetry()) return false;
    this.metrics?.retryCounter(redirect.kind).inc();
    if (redirect.kind === 'clusterdown') this.refresher.requestRefresh('error');
    this.retryLater(req, errorLine(frame));
    return true;
  }

  /**
   * A link failed under the request, or the pool refused it. Retried — within the request's cap
   * and the node's retry budget — only when it cannot have run (never written) or is safe to
   * repeat (read-only, and not a timeout: a node that did not answer would not answer again).
   * A write whose fate is unknown gets the error, never a second send. Shed requests (a bound
   * was reached) are never retried: that would add load where there is too much.
   */
  handleLinkFailure(req: ProxyRequest, error: string, written: boolean, cause?: LinkFailureCause): void {
    if (req.readChoice !== null && req.readChoice.role === 'replica' && !req.sink.closed) {
      this.readFallback(req, req.readChoice.node.address, 'connection');
      return;
    }
    const shed = cause === 'shed';
    if (!shed) this.refresher.requestRefresh('error');
    const timedOut = cause === 'timeout';
    const repeatable = !shed && (!written || (req.safeToRepeat && !timedOut));
    if (!repeatable || req.retries >= this.options.retryBudget || !this.pools.health(req.node).tryRetry()) {
      this.metrics?.commandErrorCounter(req.command, timedOut ? 'timeout' : 'proxy').inc();
      if (req.retries > 0) this.metrics?.raw.retry_outcomes_total.labels('error').inc();
      req.finish(encodeError(error));
      return;
    }
    this.metrics?.retryCounter('connection').inc();
    this.retryLater(req, error);
  }

  observeReply(req: ProxyRequest, isError: boolean): void {
    const choice = req.readChoice;
    if (choice !== null) {
      choice.counter?.inc();
      if (choice.role === 'replica' && !isError) this.reads!.markServed(choice.node.address);
    }
    if (this.metrics === undefined) return;
    this.metrics.latencyHistogram(req.node).observe((performance.now() - req.sentAt) / 1000);
    if (isError) this.metrics.commandErrorCounter(req.command, 'server').inc();
    if (req.retries > 0) this.metrics.raw.retry_outcomes_total.labels(isError ? 'error' : 'ok').inc();
  }

  private retryLater(req: ProxyRequest, lastError: string): void {
    const delay = fullJitterDelay(this.options.retryBaseMs, this.options.retryMaxMs, req.retries);
    req.retries++;
    setTimeout(() => {
      if (req.sink.closed) return req.finish(encodeError(lastError));
      const topology = this.refresher.current;
      const error = topology ? this.send(req, topology) : encodeError(ProxyError.topologyUnknown());
      if (error) req.finish(encodeError(ProxyError.retriesExhausted(req.command.toUpperCase(), lastError)));
    }, delay);
  }
}
