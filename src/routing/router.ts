import calculateSlot from 'cluster-key-slot';
import type { Logger } from 'pino';
import { clockNow } from '../util/read-clock.js';
import type { CommandSpec } from '../commands/command-table.js';
import type { CommandTable } from '../commands/command-table.js';
import type { TopologyRefresher } from '../cluster/topology-refresher.js';
import type { ClusterNode, Shard, Topology } from '../cluster/topology.js';
import type { UpstreamPools } from '../upstream/upstream-pools.js';
import { ignoreReply, type Link, type LinkFailureCause, type LinkRequest } from '../upstream/link.js';
import type { Metrics } from '../metrics/metrics.js';
import { encodeCommand, encodeError } from '../resp/encode.js';
import { ProxyError } from '../errors.js';
import { UpstreamCall, type CallClient, type CallFactory, type CallOwner } from './upstream-call.js';
import type { KeyedRouteHook } from './hooks.js';
import { parseRedirect, errorLine } from './redirect.js';
import { ASKING, RedirectFollower } from './redirect-follower.js';
import { CommandFlag } from '../commands/command-flags.js';
import type { ReadRouting } from './read-strategy.js';
import { fullJitterDelay } from '../upstream/backoff.js';
import { ClusterScan, FanOut, fanOutTargets } from './fan-out.js';
import { responsePolicy } from '../commands/proxy-handling.js';
import { NodeBatch, type SplitCommand } from './split-command.js';
import type { BlockItems, Route, RoutedRequest } from './route.js';
import type { UpstreamIdentity } from '../acl/upstream-identity.js';

export interface RouterOptions {
  maxRedirects: number;
  retryBudget: number;
  retryBaseMs: number;
  retryMaxMs: number;
}


/**
 * Commands a node may take its time over, answering nobody meanwhile (SAVE of a big data set, a
 * synchronous FLUSHALL …): while one is in flight on a node, its links wait
 * timeouts.adminCommandMs for a reply instead of timeouts.commandMs (NodeHealth.longCommandSent),
 * as a client of Valkey itself simply waits.
 */
const LONG_COMMANDS: ReadonlySet<string> = new Set(['save', 'flushall', 'flushdb', 'swapdb', 'function|flush', 'script|flush']);

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
  /** Offered every keyed call while set (hot keys set it while detection or split keys are active). */
  keyedHook: KeyedRouteHook | null = null;
  /**
   * An error reply to a call made as a user's upstream identity (set by the server): the node's
   * name for the identity becomes the respool user's, and a denial is read back into ACL LOG.
   */
  identityErrors: ((call: UpstreamCall, identity: UpstreamIdentity, frame: Buffer) => Buffer) | null = null;
  /** MOVED and ASK, for the router's own calls and for every other path to a node (redirect-follower.ts). */
  readonly redirects: RedirectFollower;

  constructor(
    private readonly refresher: TopologyRefresher,
    private readonly pools: UpstreamPools,
    private readonly options: RouterOptions,
    private readonly log: Logger,
    private readonly metrics?: Metrics,
    /** Read strategies (read-strategy.ts); undefined or inactive: every command to the primary. */
    private readonly reads?: ReadRouting,
  ) {
    this.redirects = new RedirectFollower(refresher, options.maxRedirects, metrics);
  }

  /**
   * Sends a request where it belongs (route.ts names each destination). Returns an error reply
   * when it cannot leave and its owner will not be told, or null when the request is on its way
   * (its owner is completed by the reply, or by the error, later).
   */
  send(route: Route): Buffer | null {
    switch (route.to) {
      case 'keys':
        return this.toKeys(route.owner, route.request, route.table, route.script === true, route.makeCall);
      case 'slots':
        this.toSlots(route.split, route.from, route.until);
        return null;
      case 'all-nodes':
        return this.toAllNodes(route.owner, route.request);
      case 'node':
        this.toNode(route.owner, route.raw, route.command, route.node, route.role, route.index ?? 0);
        return null;
      case 'call': {
        const topology = this.refresher.current;
        const error = topology ? this.sendCall(route.call, topology) : encodeError(ProxyError.topologyUnknown());
        if (error) route.call.finish(error);
        return null;
      }
      case 'block':
        if ('ask' in route) this.toAskTarget(route.client, route.ask.host, route.ask.port, route.items);
        else this.toBlockNode(route.client, route.node, route.items);
        return null;
    }
  }

  /**
   * keys → slot → the slot's primary, or the read strategy's choice for read-only commands;
   * keyless → any primary. Every key must hash to one slot (CROSSSLOT otherwise). Keyed calls
   * are offered to the hook (hot keys) first. `makeCall`: the call to send, when its owner needs
   * a subclass (an EVALSHA that reloads its script on NOSCRIPT, handlers/script.ts); a plain
   * UpstreamCall otherwise. `request.args` is read only in a cluster (keys → slot).
   */
  private toKeys(owner: CallOwner, request: RoutedRequest, table: CommandTable, isScript: boolean, makeCall: CallFactory | undefined): Buffer | null {
    const { raw, spec, command } = request;
    const topology = this.refresher.current;
    if (topology === null) return encodeError(ProxyError.topologyUnknown());
    let slot = -1;
    let firstKey: Buffer | undefined;
    if (topology.mode === 'cluster' && spec !== undefined) {
      const args = request.args; // a standalone upstream needs no argument views (request-framer.ts)
      const keys = table.keyIndexes(spec, args);
      if (keys.length > 0) {
        firstKey = args[keys[0]!]!;
        slot = calculateSlot(firstKey);
        for (let i = 1; i < keys.length; i++) {
          if (calculateSlot(args[keys[i]!]!) !== slot) return encodeError(ProxyError.crossSlot());
        }
        const hook = this.keyedHook;
        if (hook !== null) {
          const routed = hook.route(owner, raw, args, spec, keys, slot, command, isScript);
          if (routed !== null) {
            this.metrics?.commandCounter(command).inc();
            return routed === true ? null : routed;
          }
        }
      }
    }
    const call = makeCall === undefined ? new UpstreamCall(owner, this, raw, command, slot) : makeCall(owner, this, raw, command, slot);
    if (spec !== undefined && (spec.flags & CommandFlag.READONLY) !== 0) call.safeToRepeat = true;
    // Read-only commands in a cluster follow the read strategy; everything else the primary.
    const reads = this.reads;
    if (reads !== undefined && reads.active && spec !== undefined && (spec.flags & CommandFlag.READONLY) !== 0 && topology.mode === 'cluster' && (owner.client.identity?.replicaReads ?? true)) {
      call.read = reads.strategyFor(firstKey);
    }
    this.metrics?.commandCounter(command).inc();
    return this.sendCall(call, topology);
  }

  /**
   * Parts [from, to) of a command split by slot (split-command.ts): each part's node is its
   * slot's primary, and the parts for one node leave as one buffer on the client's link (one
   * NodeBatch, no call per part). A part is routed alone (to: 'keys') when something must look
   * at it first: the read strategy (a read-only command while one is active) or the hot-key
   * hook (a split key among its keys, a fleet write). Parts that cannot be sent are answered
   * with the error a lone part would get.
   */
  private toSlots(split: SplitCommand, from: number, to: number): void {
    const topology = this.refresher.current;
    if (topology === null) {
      for (let p = from; p < to; p++) split.partDone(p, encodeError(ProxyError.topologyUnknown()));
      return;
    }
    const client = split.client;
    const reads = this.reads;
    const alone = split.readOnly && reads !== undefined && reads.active && (client.identity?.replicaReads ?? true);
    const hook = this.keyedHook;
    const nodes: ClusterNode[] = [];
    const groups: number[][] = [];
    let sent = 0;
    for (let p = from; p < to; p++) {
      const slot = split.slots[p]!;
      if (alone || (hook !== null && !hook.passPart(split.args, split.keys, split.order, split.start[p]!, split.start[p + 1]!, slot, split.spec))) {
        split.routeAlone(this, p);
        continue;
      }
      const node = topology.primaryForSlot(slot);
      if (node === undefined) {
        split.partDone(p, encodeError(ProxyError.slotNotServed(slot)));
        continue;
      }
      let g = nodes.indexOf(node);
      if (g < 0) {
        g = nodes.length;
        nodes.push(node);
        groups.push([]);
      }
      groups[g]!.push(p);
      sent++;
    }
    if (sent > 0) this.metrics?.commandCounter(split.command).inc(sent);
    for (let g = 0; g < nodes.length; g++) {
      const node = nodes[g]!;
      const parts = groups[g]!;
      const offsets = new Int32Array(parts.length + 1);
      let size = 0;
      for (let i = 0; i < parts.length; i++) {
        offsets[i] = size;
        size += split.partSize(parts[i]!);
      }
      offsets[parts.length] = size;
      const data = Buffer.allocUnsafe(size);
      for (let i = 0; i < parts.length; i++) split.writePart(parts[i]!, data, offsets[i]!);
      const batch = new NodeBatch(split, this, node.address, parts, offsets, data);
      const pool = this.pools.forNode(node, client.protocol, 'primary', client.db, client.identity);
      const place = pool.placeFor(client);
      if (pool.sendParts(data, batch, parts.length, place)) continue;
      // No open link with room (or requests waiting for one): each part on its own, in order.
      for (let i = 0; i < parts.length; i++) {
        const call = batch.callFor(i);
        call.sentAt = 0;
        pool.send(call.raw, call, place);
      }
    }
  }

  /** A split command's part was answered by `node` (its batch written at `sentAt`): as observeReply for a call. */
  observePart(split: SplitCommand, node: string, sentAt: number): void {
    const metrics = this.metrics;
    if (metrics === undefined) return;
    const ms = clockNow() - sentAt;
    metrics.latencyHistogram(node).observe(ms / 1000);
    split.upstreamTimed(node, ms);
  }

  /**
   * A command that speaks for the whole data set (DBSIZE, KEYS, FLUSHALL, SCAN, …) in cluster
   * mode: to every primary (or every node), replies merged (fan-out.ts). An error reply when it
   * cannot start; null when `target` will be filled.
   */
  private toAllNodes(target: CallOwner, request: RoutedRequest & { readonly spec: CommandSpec }): Buffer | null {
    const { raw, args, spec, command } = request;
    const topology = this.refresher.current;
    if (topology === null) return encodeError(ProxyError.topologyUnknown());
    this.metrics?.commandCounter(command).inc();
    if (command === 'scan') return ClusterScan.start(target, topology, this, args);
    const targets = fanOutTargets(spec, topology);
    const fan = new FanOut(target, command, responsePolicy(spec), targets.length);
    targets.forEach(({ node, role }, i) => this.toNode(fan, raw, command, node, role, i));
    return null;
  }

  /** One call pinned to a node (fan-out children): not redirected, not retried. */
  private toNode(owner: CallOwner, raw: Buffer, command: string, node: ClusterNode, role: 'primary' | 'replica', index: number): void {
    const call = new UpstreamCall(owner, this, raw, command, -1);
    call.pinned = { node, role };
    call.index = index;
    call.node = node.address;
    if (LONG_COMMANDS.has(command)) this.pools.health(node.address).longCommandSent(call);
    const client = call.client;
    const pool = this.pools.forNode(node, client.protocol, role, client.db, client.identity);
    pool.send(raw, call, pool.placeFor(client));
  }

  /**
   * The slot all of a command's keys hash to (-1: keyless, or a standalone upstream), or the
   * error reply when they hash to several slots or the topology is not known yet.
   */
  slotOf(spec: CommandSpec | undefined, args: Buffer[], table: CommandTable): number | Buffer {
    const topology = this.refresher.current;
    if (topology === null) return encodeError(ProxyError.topologyUnknown());
    if (topology.mode !== 'cluster' || spec === undefined) return -1;
    const keys = table.keyIndexes(spec, args);
    if (keys.length === 0) return -1;
    const slot = calculateSlot(args[keys[0]!]!);
    for (let i = 1; i < keys.length; i++) if (calculateSlot(args[keys[i]!]!) !== slot) return encodeError(ProxyError.crossSlot());
    return slot;
  }

  /** The current topology snapshot (null until the first discovery). */
  topology(): Topology | null {
    return this.refresher.current;
  }

  /**
   * Requests that must run back to back on one connection (a MULTI … EXEC block) to `node`: one
   * write on the client's shared link, never retried (routing/transaction-block.ts follows redirects).
   */
  private toBlockNode(client: CallClient, node: ClusterNode, items: BlockItems): void {
    const pool = this.pools.forNode(node, client.protocol, 'primary', client.db, client.identity);
    pool.sendBlock(items, pool.placeFor(client));
  }

  /**
   * A block a node answered ASK for (mid-migration): to the ASK's target, ASKING first (it holds
   * for a whole MULTI … EXEC). routing/transaction-block.ts decides when (redirects.step).
   */
  private toAskTarget(client: CallClient, host: string, port: number, items: BlockItems): void {
    const pool = this.pools.get(host, port, client.protocol, 'primary', client.db, client.identity);
    pool.sendBlock([{ data: ASKING, req: ignoreReply() }, ...items], pool.placeFor(client));
  }

  /** The primary that owns `slot` now (any primary for -1); undefined when none does. */
  primaryFor(slot: number): ClusterNode | undefined {
    const topology = this.refresher.current;
    return topology === null ? undefined : this.nodeFor(slot, topology);
  }

  /** Sends (or re-sends) a request to the node its slot maps to now. Error text when it cannot. */
  private sendCall(req: UpstreamCall, topology: Topology): Buffer | null {
    if (req.read !== null) return this.sendRead(req, topology);
    const node = this.nodeFor(req.slot, topology);
    if (node === undefined) return encodeError(ProxyError.slotNotServed(req.slot));
    req.node = node.address;
    if (LONG_COMMANDS.has(req.command)) this.pools.health(node.address).longCommandSent(req);
    // The client's database now: it cannot have changed while the call was outstanding (SELECT
    // and RESET wait for every earlier reply, handlers/local.ts), so retries stay in it.
    const client = req.client;
    const pool = this.pools.forNode(node, client.protocol, 'primary', client.db, req.asRespool ? null : client.identity);
    pool.send(req.raw, req, pool.placeFor(client), req.around(0));
    return null;
  }

  /** A read under a strategy: the strategy's first usable choice for the slot's shard. */
  private sendRead(req: UpstreamCall, topology: Topology): Buffer | null {
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
    const client = req.client;
    const pool = this.pools.forNode(choice.node, client.protocol, choice.role, client.db, req.asRespool ? null : client.identity);
    pool.send(req.raw, req, -1, req.around(0));
    return null;
  }

  /**
   * A replica could not serve a read (MOVED: not its slot any more; LOADING; link failure):
   * try the strategy's next choice now. Safe even if the command ran: it is read-only. Bounded:
   * each step adds the replica to the request's avoid list, and the primary ends every order.
   */
  private readFallback(req: UpstreamCall, address: string, reason: 'moved' | 'loading' | 'connection'): void {
    (req.avoid ??= []).push(address);
    if (reason === 'moved') {
      const limit = this.redirects.replicaMoved(req.redirects++, req.command);
      if (limit !== null) return req.finish(limit);
    } else {
      this.reads!.markFailed(address);
      this.metrics?.retryCounter(reason).inc();
      if (reason === 'connection') this.refresher.requestRefresh('error');
    }
    const topology = this.refresher.current;
    const error = topology ? this.sendCall(req, topology) : encodeError(ProxyError.topologyUnknown());
    if (error) req.finish(error);
  }

  private nodeFor(slot: number, topology: Topology): ClusterNode | undefined {
    if (slot >= 0) return topology.primaryForSlot(slot);
    const primaries = topology.shards;
    if (primaries.length === 0) return undefined;
    this.roundRobin = (this.roundRobin + 1) % primaries.length;
    return primaries[this.roundRobin]!.primary;
  }

  /** An identity call's error reply, as the client should see it (identityErrors). */
  identityError(call: UpstreamCall, identity: UpstreamIdentity, frame: Buffer): Buffer {
    return this.identityErrors === null ? frame : this.identityErrors(call, identity, frame);
  }

  /** Called for every error reply; true when the router took the request over (redirect/retry). */
  handleErrorReply(req: UpstreamCall, frame: Buffer, link: Link): boolean {
    if (req.pinned !== null) return false; // a node's own answer for a fan-out: passed on as it is
    const redirect = parseRedirect(frame);
    if (redirect === null) return false;
    if (req.readChoice !== null && req.readChoice.role === 'replica' && (redirect.kind === 'moved' || redirect.kind === 'loading')) {
      this.readFallback(req, req.readChoice.node.address, redirect.kind);
      return true;
    }
    if (redirect.kind === 'moved' || redirect.kind === 'ask') {
      const step = this.redirects.stepFor(redirect, link.address, req.redirects++, req.command)!;
      if (step.kind === 'limit') {
        req.finish(step.error);
      } else if (step.kind === 'moved') {
        req.slot = step.slot;
        const error = this.sendCall(req, this.refresher.current!);
        if (error) req.finish(error);
      } else {
        req.node = `${step.host}:${step.port}`;
        const client = req.client;
        const pool = this.pools.get(step.host, step.port, client.protocol, 'primary', client.db, req.asRespool ? null : client.identity);
        const around = req.around(1); // ASKING must come right before the command it lets in
        pool.sendBlock(around === null ? [{ data: ASKING, req: ignoreReply() }, { data: req.raw, req }] : [around.before, { data: ASKING, req: ignoreReply() }, { data: req.raw, req }, around.after], pool.placeFor(client));
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
  handleLinkFailure(req: UpstreamCall, error: string, written: boolean, cause?: LinkFailureCause): void {
    if (req.pinned !== null) {
      this.metrics?.commandErrorCounter(req.command, cause === 'timeout' ? 'timeout' : 'proxy').inc();
      req.finish(encodeError(error));
      return;
    }
    if (req.readChoice !== null && req.readChoice.role === 'replica' && !req.client.closed) {
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

  observeReply(req: UpstreamCall, isError: boolean): void {
    const choice = req.readChoice;
    if (choice !== null) {
      choice.counter?.inc();
      if (choice.role === 'replica' && !isError) this.reads!.markServed(choice.node.address);
    }
    if (this.metrics === undefined) return;
    const ms = clockNow() - req.sentAt;
    this.metrics.latencyHistogram(req.node).observe(ms / 1000);
    const owner = req.owner;
    if (owner.upstreamTimed !== undefined) owner.upstreamTimed(req.node, ms); // the slow log's node and split
    if (isError) this.metrics.commandErrorCounter(req.command, 'server').inc();
    if (req.retries > 0) this.metrics.raw.retry_outcomes_total.labels(isError ? 'error' : 'ok').inc();
  }

  private retryLater(req: UpstreamCall, lastError: string): void {
    const delay = fullJitterDelay(this.options.retryBaseMs, this.options.retryMaxMs, req.retries);
    req.retries++;
    setTimeout(() => {
      if (req.client.closed) return req.finish(encodeError(lastError));
      const topology = this.refresher.current;
      const error = topology ? this.sendCall(req, topology) : encodeError(ProxyError.topologyUnknown());
      if (error) req.finish(encodeError(ProxyError.retriesExhausted(req.command.toUpperCase(), lastError)));
    }, delay);
  }
}
