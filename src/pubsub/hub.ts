import calculateSlot from 'cluster-key-slot';
import type { Logger } from 'pino';
import type { TopologyRefresher } from '../cluster/topology-refresher.js';
import type { RedirectFollower } from '../routing/redirect-follower.js';
import type { Topology } from '../cluster/topology.js';
import type { RespoolConfig } from '../config/types.js';
import type { Metrics } from '../metrics/metrics.js';
import { ProxyError } from '../errors.js';
import { globMatch } from '../util/glob.js';
import { MAX_NAMES_PER_COMMAND, subscriberConnectionFor, type SubscriberConnection, type CommandCallbacks, type MessageKind, type SubscriberConnectionHandler } from './subscriber-connection.js';
import { isKeyspaceChannel, SUBSCRIBE_COMMAND, UNSUBSCRIBE_COMMAND, type Entry, type HubCore, type SubscribeRequest, type Subscriber, type SubscriptionKind } from './subscription-entry.js';
import { ClassicSubscriber } from './classic-subscriber.js';
import { NodeSubscribers } from './node-subscribers.js';
import { ShardSubscribers } from './shard-subscribers.js';
import { deliverRun, ONE_FRAME } from './message-run.js';

export type { Subscriber, SubscriptionKind } from './subscription-entry.js';
export { isKeyspaceChannel } from './subscription-entry.js';

export interface PubSubHubDeps {
  refresher: TopologyRefresher;
  /** MOVED for SSUBSCRIBE (shard-subscribers.ts): the router's follower, one rule for every path. */
  redirects: RedirectFollower;
  config: RespoolConfig;
  log: Logger;
  metrics?: Metrics;
}

export interface PubSubStats {
  /** Subscriber connections to the upstream (open or connecting): classic + shard + other primaries (keyspace events). */
  upstreamConnections: number;
  /** Channels / patterns / shard channels respool holds (or is acquiring) upstream. */
  channels: number;
  patterns: number;
  shardChannels: number;
  /** Subscribers holding or asking for at least one subscription. */
  subscribers: number;
}

/** An idle subscriber connection (nothing subscribed on it) is closed after this long. */
const IDLE_CLOSE_MS = 30_000;

/**
 * Every client's subscriptions, multiplexed over few upstream subscriber connections: the
 * registry of names and the requests waiting for them, and the fan-out of messages. Which
 * connections carry which names is decided by three managers:
 *
 *   channels, patterns : Map<key, Entry> — on ONE classic connection (classic-subscriber.ts).
 *                        Subscribed upstream once however many clients hold them.
 *   node-wide entries  : patterns and keyspace channels, also on every other primary
 *                        (node-subscribers.ts: keyspace events are published only where the key lives)
 *   shards             : Map<key, Entry> — each on the connection to the primary owning its slot
 *                        (shard-subscribers.ts)
 *   entry e            : receivers ∪ {r.sub | r ∈ e.waiting} are the clients holding or asking
 *                        for e; when both are empty, e is dropped from its map and UNSUBSCRIBEd
 *                        upstream (if it was sent). A later subscribe to the same name makes a
 *                        new entry whose SUBSCRIBE follows that UNSUBSCRIBE on the same
 *                        connection (its outbox, subscriber-connection.ts), so the upstream ends subscribed.
 *   messages           : go to e.receivers only, and only from e.conn. A subscriber joins
 *                        receivers when its whole request is confirmed, just before done(null),
 *                        so it never sees a message before its own confirmation.
 *   request r          : done once, when every entry of r is ready (r.remaining = 0) — or
 *                        with an error (refused upstream, timeout, shard connection lost), after
 *                        which r's subscriber holds none of the names r added.
 */
export class PubSubHub implements HubCore {
  /** How long a subscriber connection with nothing subscribed stays open (tests shorten it). */
  static idleCloseMs = IDLE_CLOSE_MS;

  private readonly channels = new Map<string, Entry>();
  private readonly patterns = new Map<string, Entry>();
  private readonly shards = new Map<string, Entry>();
  /** Every entry a subscriber receives from or waits for. */
  private readonly bySub = new Map<Subscriber, Set<Entry>>();
  /** Live node-wide entries (patterns and keyspace channels) in channels ∪ patterns. */
  nodeWideCount = 0;
  closed = false;

  private readonly classic: ClassicSubscriber;
  private readonly nodes: NodeSubscribers;
  private readonly shardSubs: ShardSubscribers;

  readonly refresher: TopologyRefresher;
  readonly redirects: RedirectFollower;
  readonly config: RespoolConfig;
  readonly log: Logger;
  /** Read at use: a reload may change config.timeouts (src/config/reload.ts). */
  private get requestTimeoutMs(): number {
    return this.config.timeouts.connectMs + this.config.timeouts.commandMs;
  }

  constructor(deps: PubSubHubDeps) {
    this.refresher = deps.refresher;
    this.redirects = deps.redirects;
    this.config = deps.config;
    this.log = deps.log.child({ component: 'pubsub' });
    this.nodes = new NodeSubscribers(this, () => this.classic.current?.address ?? null);
    this.classic = new ClassicSubscriber(this, () => this.nodes.reconcile());
    this.shardSubs = new ShardSubscribers(this);
    deps.refresher.onChange((topology) => this.onTopology(topology));
  }

  /**
   * Subscribes `sub` to `names` of one kind. `done` is called exactly once: with null when
   * every name is confirmed upstream (at once, before subscribe returns, when respool already
   * holds them all), or with an error line (no leading "-"), after which sub holds none of the
   * names this call added. Messages reach `sub` only after done(null).
   */
  subscribe(sub: Subscriber, kind: SubscriptionKind, names: Buffer[], done: (error: string | null) => void): void {
    if (this.closed) return done(ProxyError.shuttingDown());
    const map = this.mapFor(kind);
    const unique = new Map<string, Buffer>();
    for (const name of names) unique.set(name.toString('latin1'), name);

    let slot = -1;
    if (kind === 'shard') {
      const topology = this.refresher.current;
      if (topology === null) return done(ProxyError.topologyUnknown());
      for (const name of unique.values()) {
        const s = topology.mode === 'cluster' ? calculateSlot(name) : 0;
        if (slot >= 0 && s !== slot) return done(ProxyError.crossSlot());
        slot = s;
      }
      if (slot >= 0 && topology.primaryForSlot(slot) === undefined) return done(ProxyError.slotNotServed(slot));
    }

    const request: SubscribeRequest = {
      sub, entries: [], skipped: new Set(), remaining: 0, done, timer: null, finished: false,
    };
    const fresh: Entry[] = [];
    let index = this.bySub.get(sub);
    for (const [key, name] of unique) {
      let entry = map.get(key);
      if (entry === undefined) {
        const nodeWide = kind === 'pattern' || (kind === 'channel' && isKeyspaceChannel(name));
        entry = {
          kind, key, name: Buffer.from(name), slot: kind === 'shard' ? slot : -1,
          receivers: new Set(), waiting: new Set(), state: 'idle', conn: null, nodeWide, ready: false,
          dead: false, redirects: 0,
        };
        map.set(key, entry);
        if (nodeWide) this.nodeWideCount++;
        fresh.push(entry);
      }
      if (entry.receivers.has(sub)) continue; // already held: confirmed at once, as Valkey does
      request.entries.push(entry);
      entry.waiting.add(request);
      if (!entry.ready) request.remaining++;
      if (index === undefined) this.bySub.set(sub, (index = new Set()));
      index.add(entry);
    }

    if (request.remaining === 0) {
      this.complete(request);
    } else {
      request.timer = setTimeout(() => {
        request.timer = null;
        this.fail(request, ProxyError.pubsubNotConfirmed(`${SUBSCRIBE_COMMAND[kind].toUpperCase()}`, this.requestTimeoutMs));
      }, this.requestTimeoutMs);
      request.timer.unref();
    }
    if (fresh.length > 0) {
      if (kind === 'shard') {
        this.shardSubs.subscribe(fresh);
      } else {
        this.classic.send(fresh);
        const wide = fresh.filter((e) => e.nodeWide);
        if (wide.length > 0) this.nodes.send(wide);
      }
    }
  }

  /** Unsubscribes `sub` from `names` of one kind (empty: every name of that kind it holds). */
  unsubscribe(sub: Subscriber, kind: SubscriptionKind, names: Buffer[]): void {
    const index = this.bySub.get(sub);
    if (index === undefined) return;
    if (names.length === 0) {
      for (const entry of [...index]) if (entry.kind === kind) this.leave(sub, entry, index);
    } else {
      const map = this.mapFor(kind);
      for (const name of names) {
        const entry = map.get(name.toString('latin1'));
        if (entry !== undefined && index.has(entry)) this.leave(sub, entry, index);
      }
    }
    if (index.size === 0) this.bySub.delete(sub);
    this.scheduleIdleChecks();
  }

  /** Everything `sub` holds or asked for (client closed, RESET). Its pending requests complete (done(null)). */
  unsubscribeAll(sub: Subscriber): void {
    const index = this.bySub.get(sub);
    if (index === undefined) return;
    for (const entry of [...index]) this.leave(sub, entry, index);
    this.bySub.delete(sub);
    this.scheduleIdleChecks();
  }

  /**
   * True while `sub` receives from, or waits for, this name (the hub's view of what the client
   * holds; a client reconciles its own record with it after done(error)).
   */
  holdsName(sub: Subscriber, kind: SubscriptionKind, name: Buffer): boolean {
    const e = this.mapFor(kind).get(name.toString('latin1'));
    return e !== undefined && this.bySub.get(sub)?.has(e) === true;
  }

  /**
   * What one server would count for PUBLISH / PUBSUB NUMSUB of `channel`, as seen from the node
   * holding respool's classic subscriptions (`address`, null when there is none): `upstream` is
   * what that node counts for respool's own connection (the channel itself, and each matching
   * pattern, active there); `clients` what respool's clients receive instead (each subscriber of
   * the channel, and of each matching pattern). `channelOnly` restricts both to the channel.
   */
  countsFor(channel: Buffer, channelOnly = false): { address: string | null; upstream: number; clients: number } {
    const classic = this.classic.current;
    if (classic === null || classic.state !== 'ready') return { address: null, upstream: 0, clients: 0 };
    let upstream = 0;
    let clients = 0;
    const own = this.channels.get(channel.toString('latin1'));
    if (own !== undefined && own.state === 'active' && own.conn === classic) {
      upstream++;
      clients += own.receivers.size;
    }
    if (!channelOnly) {
      for (const entry of this.patterns.values()) {
        if (entry.state !== 'active' || entry.conn !== classic || !globMatch(entry.name, channel)) continue;
        upstream++;
        clients += entry.receivers.size;
      }
    }
    return { address: classic.address, upstream, clients };
  }

  /**
   * Runs `then` once the node holding respool's classic subscriptions has confirmed every
   * UNSUBSCRIBE respool asked of it: until then it still counts those names, and a PUBLISH's
   * count (countsFor) would be one too many (handlers/pubsub.ts waits for this).
   */
  afterUnsubscribes(then: () => void): void {
    const classic = this.classic.current;
    if (classic === null) return then();
    classic.afterUnsubscribes(then);
  }

  /** Whether afterUnsubscribes would run its callback at once. */
  get unsubscribesSettled(): boolean {
    return this.classic.current?.unsubscribesSettled ?? true;
  }

  /** Subscribers of one channel / pattern / shard channel in respool (receivers only). */
  subscriberCount(kind: SubscriptionKind, name: Buffer | string): number {
    const key = typeof name === 'string' ? Buffer.from(name).toString('latin1') : name.toString('latin1');
    return this.mapFor(kind).get(key)?.receivers.size ?? 0;
  }

  stats(): PubSubStats {
    return {
      upstreamConnections: (this.classic.current !== null ? 1 : 0) + this.shardSubs.openCount() + this.nodes.openCount(),
      channels: this.channels.size,
      patterns: this.patterns.size,
      shardChannels: this.shards.size,
      subscribers: this.bySub.size,
    };
  }

  /** Closes every upstream connection; pending requests fail. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    const requests = new Set<SubscribeRequest>();
    for (const map of [this.channels, this.patterns, this.shards]) {
      for (const e of map.values()) for (const r of e.waiting) requests.add(r);
    }
    for (const r of requests) this.fail(r, ProxyError.shuttingDown());
    this.classic.close();
    this.shardSubs.close();
    this.nodes.close();
  }

  // ---- requests ------------------------------------------------------------------------------

  private complete(r: SubscribeRequest): void {
    if (r.finished) return;
    r.finished = true;
    if (r.timer) clearTimeout(r.timer);
    for (const e of r.entries) {
      if (r.skipped.has(e)) continue;
      e.waiting.delete(r);
      e.receivers.add(r.sub);
    }
    r.done(null);
  }

  fail(r: SubscribeRequest, error: string): void {
    if (r.finished) return;
    r.finished = true;
    if (r.timer) clearTimeout(r.timer);
    const index = this.bySub.get(r.sub);
    for (const e of r.entries) {
      if (r.skipped.has(e)) continue;
      e.waiting.delete(r);
      if (!this.holds(r.sub, e)) index?.delete(e);
      this.release(e);
    }
    if (index?.size === 0) this.bySub.delete(r.sub);
    r.done(error);
    this.scheduleIdleChecks();
  }

  /** sub stops receiving from e, and stops waiting for it (its requests then complete without it). */
  private leave(sub: Subscriber, e: Entry, index: Set<Entry>): void {
    e.receivers.delete(sub);
    index.delete(e);
    for (const r of [...e.waiting]) {
      if (r.sub !== sub) continue;
      e.waiting.delete(r);
      r.skipped.add(e);
      if (!e.ready) r.remaining--;
      if (r.remaining === 0) this.complete(r);
    }
    this.release(e);
  }

  private holds(sub: Subscriber, e: Entry): boolean {
    if (e.receivers.has(sub)) return true;
    for (const r of e.waiting) if (r.sub === sub) return true;
    return false;
  }

  /** Drops e when nobody holds or waits for it, and UNSUBSCRIBEs it upstream if it was sent. */
  release(e: Entry): void {
    if (e.dead || e.receivers.size > 0 || e.waiting.size > 0) return;
    this.forget(e);
    const conn = e.conn;
    if (conn !== null && conn.state !== 'closed' && e.state !== 'idle') conn.unsubscribeLater(UNSUBSCRIBE_COMMAND[e.kind], e.name);
    if (e.nodeWide) this.nodes.unsubscribe(e);
  }

  /** Removes e from its map (and its shard connection's set); it is dead from now on. */
  forget(e: Entry): void {
    if (e.dead) return;
    e.dead = true;
    const map = this.mapFor(e.kind);
    if (map.get(e.key) === e) map.delete(e.key);
    if (e.nodeWide) this.nodeWideCount--;
    if (e.kind === 'shard' && e.conn !== null) this.shardSubs.detach(e, e.conn);
  }

  /** e is now confirmed on `conn`: requests waiting only for it complete. */
  private activate(e: Entry, conn: SubscriberConnection): void {
    if (e.dead || e.conn !== conn || e.state !== 'subscribing') return;
    e.state = 'active';
    e.redirects = 0;
    this.refreshReady(e);
  }

  /** e is no longer confirmed (its connection died): waiting requests need it again. */
  deactivate(e: Entry): void {
    e.state = 'idle';
    e.conn = null;
    this.refreshReady(e);
  }

  /** Recomputes e.ready; requests waiting for e complete when it becomes ready, and wait again when it stops. */
  refreshReady(e: Entry): void {
    if (e.dead) return;
    const ready = e.state === 'active' && (!e.nodeWide || this.nodes.confirmedEverywhere(e));
    if (ready === e.ready) return;
    e.ready = ready;
    for (const r of [...e.waiting]) {
      if (!ready) r.remaining++;
      else if (--r.remaining === 0) this.complete(r);
    }
  }

  /** Callbacks for one SUBSCRIBE/PSUBSCRIBE/SSUBSCRIBE of `batch` on `conn`. */
  private subscribeCallbacks(conn: SubscriberConnection, batch: Entry[]): CommandCallbacks {
    return {
      confirmed: (i) => this.activate(batch[i]!, conn),
      failed: (error, connectionLost) => {
        if (connectionLost) return; // the connection's closed handler deals with its entries
        this.onSubscribeRefused(conn, batch, error);
      },
    };
  }

  private onSubscribeRefused(conn: SubscriberConnection, batch: Entry[], error: string): void {
    const live = batch.filter((e) => !e.dead && e.conn === conn && e.state === 'subscribing');
    if (live.length === 0) return;
    if (live[0]!.kind === 'shard' && this.shardSubs.redirect(live, conn, error)) return;
    this.log.warn({ node: conn.address, error, names: live.length }, 'upstream refused a subscription');
    let keepsReceivers = false;
    for (const e of live) {
      e.state = 'idle';
      e.conn = null;
      if (e.kind === 'shard') this.shardSubs.detach(e, conn);
      for (const r of [...e.waiting]) this.fail(r, error);
      if (e.receivers.size > 0) {
        if (e.kind === 'shard') this.lose(e, false);
        else keepsReceivers = true;
      } else {
        this.release(e);
      }
    }
    // Classic names that clients already held (re-subscribe after a reconnect) were refused:
    // start over on a fresh connection, after a backoff.
    if (keepsReceivers && conn === this.classic.current) conn.close(`re-subscribe refused: ${error}`);
  }

  // ---- sending -------------------------------------------------------------------------------

  sendSubscribe(conn: SubscriberConnection, entries: Entry[]): void {
    // UNSUBSCRIBEs queued this turn go first (the connection's outbox): a name released then wanted again ends subscribed.
    const byKind = new Map<SubscriptionKind, Entry[]>();
    for (const e of entries) {
      e.state = 'subscribing';
      e.conn = conn;
      if (e.ready) this.refreshReady(e);
      let list = byKind.get(e.kind);
      if (list === undefined) byKind.set(e.kind, (list = []));
      list.push(e);
    }
    for (const [kind, list] of byKind) {
      for (let i = 0; i < list.length; i += MAX_NAMES_PER_COMMAND) {
        const batch = list.slice(i, i + MAX_NAMES_PER_COMMAND);
        conn.subscribe(SUBSCRIBE_COMMAND[kind], batch.map((e) => e.name), this.subscribeCallbacks(conn, batch));
      }
    }
  }

  /**
   * Respool no longer holds shard channel e: drop it and tell every receiver. `unsubscribe`:
   * also SUNSUBSCRIBE it upstream (respool decided, Valkey still holds it).
   */
  lose(e: Entry, unsubscribe: boolean): void {
    if (e.dead) return;
    const conn = e.conn;
    this.forget(e);
    if (unsubscribe && conn !== null && conn.state !== 'closed') conn.unsubscribeLater('sunsubscribe', e.name);
    for (const r of [...e.waiting]) this.fail(r, ProxyError.upstreamUnavailable(conn?.address ?? 'unknown', 'shard channel moved'));
    const receivers = [...e.receivers];
    e.receivers.clear();
    for (const sub of receivers) {
      const index = this.bySub.get(sub);
      index?.delete(e);
      if (index?.size === 0) this.bySub.delete(sub);
    }
    for (const sub of receivers) if (!sub.closed) sub.shardChannelLost(e.name);
    this.scheduleIdleChecks();
  }

  /** A new topology: shard channels follow their slots, node connections the primaries. */
  private onTopology(topology: Topology): void {
    this.shardSubs.onTopology(topology);
    this.nodes.reconcile();
  }

  // ---- messages ------------------------------------------------------------------------------

  onMessage(conn: SubscriberConnection, kind: MessageKind, pattern: string | null, channel: string, frames: Buffer, starts: readonly number[]): void {
    const e = kind === 'message' ? this.channels.get(channel) : kind === 'pmessage' ? this.patterns.get(pattern!) : this.shards.get(channel);
    if (e === undefined || e.conn !== conn || e.receivers.size === 0) return;
    this.fanOut(e, frames, starts);
  }

  /** One run of messages to every receiver of `e` (message-run.ts deliverRun). */
  fanOut(e: Entry, frames: Buffer, starts: readonly number[] = ONE_FRAME): void {
    deliverRun(e.receivers, frames, starts);
  }

  // ---- plumbing ------------------------------------------------------------------------------

  connect(host: string, port: number, handler: SubscriberConnectionHandler): SubscriberConnection {
    return subscriberConnectionFor(this.config, host, port, handler);
  }

  /** Connections left with nothing subscribed are closed after PubSubHub.idleCloseMs. */
  scheduleIdleChecks(): void {
    if (this.closed) return;
    this.nodes.scheduleIdleChecks(PubSubHub.idleCloseMs);
    this.classic.scheduleIdleCheck(PubSubHub.idleCloseMs);
    this.shardSubs.scheduleIdleChecks(PubSubHub.idleCloseMs);
  }

  entries(kind: SubscriptionKind): Map<string, Entry> {
    return this.mapFor(kind);
  }

  private mapFor(kind: SubscriptionKind): Map<string, Entry> {
    return kind === 'channel' ? this.channels : kind === 'pattern' ? this.patterns : this.shards;
  }
}
