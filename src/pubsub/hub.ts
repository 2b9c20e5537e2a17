import calculateSlot from 'cluster-key-slot';
import type { Logger } from 'pino';
import { UNBOUNDED_NESTING } from '../resp/limits.js';
import type { TopologyRefresher } from '../cluster/topology-refresher.js';
import type { Topology } from '../cluster/topology.js';
import type { RespoolConfig } from '../config/types.js';
import type { Metrics } from '../metrics/metrics.js';
import { ProxyError } from '../errors.js';
import { fullJitterDelay } from '../upstream/backoff.js';
import { globMatch } from '../util/glob.js';
import {
  MAX_NAMES_PER_COMMAND,
  SubscriberConnection,
  type CommandCallbacks,
  type MessageKind,
  type SubscriberConnectionHandler,
  type UpstreamSubscribeCommand,
} from './subscriber-connection.js';

export type SubscriptionKind = 'channel' | 'pattern' | 'shard';

/** A client session in subscribed mode, as the hub sees it. */
export interface Subscriber {
  readonly id: number;
  readonly protocol: 2 | 3;
  readonly closed: boolean;
  /**
   * One complete message frame, already in this subscriber's protocol (RESP2 `*3 message ch
   * payload` / `*4 pmessage pat ch payload` / `*3 smessage ch payload`; RESP3 the same as `>`
   * pushes). A view: copy to keep.
   */
  deliver(frame: Buffer): void;
  /** Valkey dropped a sharded channel (its slot moved, failover): respool's upstream subscription is gone. */
  shardChannelLost(channel: Buffer): void;
}

export interface PubSubHubDeps {
  refresher: TopologyRefresher;
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

interface Entry {
  readonly kind: SubscriptionKind;
  /** latin1 of the name: one char per byte, binary-safe map key. */
  readonly key: string;
  readonly name: Buffer;
  /** Shard channels: the name's hash slot (0 in standalone mode); -1 otherwise. */
  readonly slot: number;
  /** Subscribers whose subscribe completed: messages go to them. */
  readonly receivers: Set<Subscriber>;
  /** Unfinished requests that include this entry (confirmed or not yet). */
  readonly waiting: Set<SubscribeRequest>;
  /** idle: not (being) subscribed on a live connection; subscribing: command written; active: confirmed. */
  state: 'idle' | 'subscribing' | 'active';
  conn: SubscriberConnection | null;
  /**
   * Also held on every other primary (a pattern, or a `__keyspace@…` / `__keyevent@…` channel):
   * keyspace notifications are published only on the node owning the key.
   */
  readonly nodeWide: boolean;
  /**
   * Confirmed everywhere a subscriber needs it: active on its connection and, when nodeWide,
   * on every node connection that is up (NodeSubscriber.conn not null). Requests count entries
   * not ready (SubscribeRequest.remaining); refreshReady() keeps the two in step.
   */
  ready: boolean;
  /** Removed from its map: confirmations and messages for it are ignored. */
  dead: boolean;
  redirects: number;
}

interface SubscribeRequest {
  readonly sub: Subscriber;
  readonly entries: Entry[];
  /** Entries the subscriber unsubscribed from before the request finished (not joined at completion). */
  readonly skipped: Set<Entry>;
  /** Entries of the request not ready now (and not skipped). */
  remaining: number;
  readonly done: (error: string | null) => void;
  timer: NodeJS.Timeout | null;
  finished: boolean;
}

/**
 * A connection to one primary other than the classic node, holding the node-wide entries
 * (patterns and keyspace-notification channels) so that the keyspace events of that node's keys
 * reach respool. Only `__keyspace@` / `__keyevent@` messages are delivered from it: everything
 * else (PUBLISH, carried to every node by the cluster bus) comes from the classic connection.
 */
interface NodeSubscriber {
  readonly address: string;
  readonly host: string;
  readonly port: number;
  /** Open or connecting; null while backing off after a loss (then not waited for). */
  conn: SubscriberConnection | null;
  /** Node-wide entries sent on conn: subscribing, or confirmed (active). */
  readonly held: Map<Entry, 'subscribing' | 'active'>;
  attempt: number;
  retryTimer: NodeJS.Timeout | null;
  idleTimer: NodeJS.Timeout | null;
}

const KEYSPACE_PREFIX = '__keyspace@';
const KEYEVENT_PREFIX = '__keyevent@';

/** A keyspace-notification channel name (latin1 key or bytes): published only where the key lives. */
export function isKeyspaceChannel(name: string | Buffer): boolean {
  const text = typeof name === 'string' ? name : name.toString('latin1', 0, KEYSPACE_PREFIX.length);
  return text.startsWith(KEYSPACE_PREFIX) || text.startsWith(KEYEVENT_PREFIX);
}

const SUBSCRIBE_COMMAND: Record<SubscriptionKind, UpstreamSubscribeCommand> = {
  channel: 'subscribe',
  pattern: 'psubscribe',
  shard: 'ssubscribe',
};
const UNSUBSCRIBE_COMMAND: Record<SubscriptionKind, UpstreamSubscribeCommand> = {
  channel: 'unsubscribe',
  pattern: 'punsubscribe',
  shard: 'sunsubscribe',
};

/**
 * Every client's subscriptions, multiplexed over few upstream subscriber connections.
 *
 *   channels, patterns : Map<key, Entry> — held on ONE classic connection to one node (any
 *                        primary: the cluster bus carries PUBLISH everywhere; standalone: the
 *                        server). Subscribed upstream once however many clients hold them.
 *   shards             : Map<key, Entry> — each on the connection to the primary owning its slot
 *                        (shardConns, one per node address).
 *   entry e            : receivers ∪ {r.sub | r ∈ e.waiting} are the clients holding or asking
 *                        for e; when both are empty, e is dropped from its map and UNSUBSCRIBEd
 *                        upstream (if it was sent). A later subscribe to the same name makes a
 *                        new entry whose SUBSCRIBE follows that UNSUBSCRIBE on the same
 *                        connection, so the upstream ends subscribed.
 *   messages           : go to e.receivers only, and only from e.conn. A subscriber joins
 *                        receivers when its whole request is confirmed, just before done(null),
 *                        so it never sees a message before its own confirmation.
 *   request r          : done once, when every entry of r is active (r.remaining = 0) — or
 *                        with an error (refused upstream, timeout, shard connection lost), after
 *                        which r's subscriber holds none of the names r added.
 *   classic connection : dies → every channel/pattern entry goes idle (receivers kept), and a
 *                        new connection to some node (another one if it can) re-subscribes all
 *                        of them after a full-jitter backoff. Messages in the gap are lost.
 *   node connections   : keyspace notifications (`__keyspace@<db>__:<key>`, `__keyevent@<db>__:<event>`)
 *                        are published only on the node owning the key; the cluster bus does
 *                        not carry them. So every node-wide entry (a pattern, or a channel named
 *                        `__keyspace@…` / `__keyevent@…`) is also subscribed on each primary
 *                        other than the classic node (nodes, one NodeSubscriber per address,
 *                        dialed while node-wide entries exist, closed when idle), and from those
 *                        connections only messages on keyspace-notification channels are
 *                        delivered: a key's event comes once (from its node), a PUBLISH once
 *                        (from the classic connection). A node-wide entry is ready when active
 *                        on the classic connection and on every node connection that is up, so a
 *                        subscriber confirmed for `*` receives the events of every key after its
 *                        confirmation. A lost node connection is not waited for (the node's events
 *                        are lost while it is down) and is re-dialed with a full-jitter backoff;
 *                        the topology decides which primaries are dialed (added, removed, failed
 *                        over, the classic connection moved). Standalone: no node connections.
 *   shard connection   : dies, or Valkey sends an `sunsubscribe` we did not ask for, or the
 *                        topology says the node no longer serves the slot → the entry is
 *                        dropped and every receiver gets shardChannelLost(channel): respool
 *                        never lets a client believe it holds a shard channel it does not.
 */
export class PubSubHub {
  /** How long a subscriber connection with nothing subscribed stays open (tests shorten it). */
  static idleCloseMs = IDLE_CLOSE_MS;

  private readonly channels = new Map<string, Entry>();
  private readonly patterns = new Map<string, Entry>();
  private readonly shards = new Map<string, Entry>();
  /** Every entry a subscriber receives from or waits for. */
  private readonly bySub = new Map<Subscriber, Set<Entry>>();

  private classic: SubscriberConnection | null = null;
  private classicAttempt = 0;
  private classicTimer: NodeJS.Timeout | null = null;
  private classicLastFailed: string | null = null;
  private classicIdleTimer: NodeJS.Timeout | null = null;

  private readonly shardConns = new Map<string, SubscriberConnection>();
  private readonly shardEntries = new Map<SubscriberConnection, Set<Entry>>();
  private readonly shardIdleTimers = new Map<SubscriberConnection, NodeJS.Timeout>();

  /** Connections to the primaries other than the classic node (cluster mode), by address. */
  private readonly nodes = new Map<string, NodeSubscriber>();
  /** Live node-wide entries (patterns and keyspace channels) in channels ∪ patterns. */
  private nodeWideCount = 0;

  /** UNSUBSCRIBEs to write, batched per connection and kind until the end of this turn. */
  private outbox = new Map<SubscriberConnection, Map<UpstreamSubscribeCommand, Buffer[]>>();
  private outboxScheduled = false;
  private closed = false;

  private readonly refresher: TopologyRefresher;
  private readonly config: RespoolConfig;
  private readonly log: Logger;
  /** Read at use: a reload may change config.timeouts (src/config/reload.ts). */
  private get requestTimeoutMs(): number {
    return this.config.timeouts.connectMs + this.config.timeouts.commandMs;
  }

  private readonly classicHandler: SubscriberConnectionHandler = {
    ready: (conn) => this.onClassicReady(conn),
    message: (conn, kind, pattern, channel, frame) => this.onMessage(conn, kind, pattern, channel, frame),
    shardChannelDropped: () => {},
    closed: (conn, reason) => this.onClassicClosed(conn, reason),
  };

  private readonly shardHandler: SubscriberConnectionHandler = {
    ready: () => {},
    message: (conn, kind, pattern, channel, frame) => this.onMessage(conn, kind, pattern, channel, frame),
    shardChannelDropped: (conn, channel) => this.onShardDropped(conn, channel),
    closed: (conn, reason) => this.onShardConnClosed(conn, reason),
  };

  constructor(deps: PubSubHubDeps) {
    this.refresher = deps.refresher;
    this.config = deps.config;
    this.log = deps.log.child({ component: 'pubsub' });
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
        this.sendShardSubscribe(fresh);
      } else {
        this.sendClassicSubscribe(fresh);
        const wide = fresh.filter((e) => e.nodeWide);
        if (wide.length > 0) this.sendNodeWide(wide);
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
    const classic = this.classic;
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

  /** Subscribers of one channel / pattern / shard channel in respool (receivers only). */
  subscriberCount(kind: SubscriptionKind, name: Buffer | string): number {
    const key = typeof name === 'string' ? Buffer.from(name).toString('latin1') : name.toString('latin1');
    return this.mapFor(kind).get(key)?.receivers.size ?? 0;
  }

  stats(): PubSubStats {
    let upstreamConnections = this.classic !== null ? 1 : 0;
    for (const conn of this.shardConns.values()) if (conn.state !== 'closed') upstreamConnections++;
    for (const x of this.nodes.values()) if (x.conn !== null && x.conn.state !== 'closed') upstreamConnections++;
    return {
      upstreamConnections,
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
    if (this.classicTimer) clearTimeout(this.classicTimer);
    if (this.classicIdleTimer) clearTimeout(this.classicIdleTimer);
    for (const t of this.shardIdleTimers.values()) clearTimeout(t);
    this.shardIdleTimers.clear();
    const requests = new Set<SubscribeRequest>();
    for (const map of [this.channels, this.patterns, this.shards]) {
      for (const e of map.values()) for (const r of e.waiting) requests.add(r);
    }
    for (const r of requests) this.fail(r, ProxyError.shuttingDown());
    this.classic?.close('respool closing');
    for (const conn of [...this.shardConns.values()]) conn.close('respool closing');
    for (const x of [...this.nodes.values()]) this.dropNode(x, 'respool closing');
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

  private fail(r: SubscribeRequest, error: string): void {
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
  private release(e: Entry): void {
    if (e.dead || e.receivers.size > 0 || e.waiting.size > 0) return;
    this.forget(e);
    const conn = e.conn;
    if (conn !== null && conn.state !== 'closed' && e.state !== 'idle') this.queueUnsubscribe(conn, UNSUBSCRIBE_COMMAND[e.kind], e.name);
    if (e.nodeWide) {
      for (const x of this.nodes.values()) {
        if (x.held.delete(e) && x.conn !== null && x.conn.state !== 'closed') this.queueUnsubscribe(x.conn, UNSUBSCRIBE_COMMAND[e.kind], e.name);
      }
    }
  }

  /** Removes e from its map (and its shard connection's set); it is dead from now on. */
  private forget(e: Entry): void {
    if (e.dead) return;
    e.dead = true;
    const map = this.mapFor(e.kind);
    if (map.get(e.key) === e) map.delete(e.key);
    if (e.nodeWide) this.nodeWideCount--;
    if (e.kind === 'shard' && e.conn !== null) this.shardEntries.get(e.conn)?.delete(e);
  }

  /** e is now confirmed on `conn`: requests waiting only for it complete. */
  private activate(e: Entry, conn: SubscriberConnection): void {
    if (e.dead || e.conn !== conn || e.state !== 'subscribing') return;
    e.state = 'active';
    e.redirects = 0;
    this.refreshReady(e);
  }

  /** e is no longer confirmed (its connection died): waiting requests need it again. */
  private deactivate(e: Entry): void {
    e.state = 'idle';
    e.conn = null;
    this.refreshReady(e);
  }

  /** Recomputes e.ready; requests waiting for e complete when it becomes ready, and wait again when it stops. */
  private refreshReady(e: Entry): void {
    if (e.dead) return;
    let ready = e.state === 'active';
    if (ready && e.nodeWide) {
      for (const x of this.nodes.values()) {
        if (x.conn !== null && x.held.get(e) !== 'active') {
          ready = false;
          break;
        }
      }
    }
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
    if (live[0]!.kind === 'shard' && error.startsWith('MOVED ') && this.redirectShard(live, error)) return;
    this.log.warn({ node: conn.address, error, names: live.length }, 'upstream refused a subscription');
    let keepsReceivers = false;
    for (const e of live) {
      e.state = 'idle';
      e.conn = null;
      if (e.kind === 'shard') this.shardEntries.get(conn)?.delete(e);
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
    if (keepsReceivers && conn === this.classic) conn.close(`re-subscribe refused: ${error}`);
  }

  // ---- classic channels and patterns ---------------------------------------------------------

  private sendClassicSubscribe(entries: Entry[]): void {
    const conn = this.ensureClassic();
    if (conn === null) return; // sent when a connection is ready (onClassicReady)
    this.sendSubscribe(conn, entries);
  }

  private sendSubscribe(conn: SubscriberConnection, entries: Entry[]): void {
    // UNSUBSCRIBEs queued this turn go first: a name released then wanted again must end subscribed.
    if (this.outbox.has(conn)) this.flushOutbox();
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
        conn.send(SUBSCRIBE_COMMAND[kind], batch.map((e) => e.name), this.subscribeCallbacks(conn, batch));
      }
    }
  }

  /** The classic connection, dialing one if none and no reconnect is pending; null while backing off. */
  private ensureClassic(): SubscriberConnection | null {
    if (this.classic !== null) return this.classic;
    if (this.classicTimer !== null || this.closed) return null;
    const node = this.pickClassicNode();
    if (node === null) {
      this.scheduleClassicReconnect('no upstream node known');
      return null;
    }
    this.classic = this.connect(node.host, node.port, this.classicHandler);
    this.log.debug({ node: this.classic.address }, 'pub/sub: classic subscriber connection dialing');
    this.reconcileNodes(); // the classic node no longer needs a node connection of its own
    return this.classic;
  }

  private pickClassicNode(): { host: string; port: number } | null {
    const topology = this.refresher.current;
    let candidates: Array<{ host: string; port: number; address: string }> = topology
      ? topology.primaries().filter((n) => n.health !== 'fail' && n.health !== 'failed')
      : this.config.upstreams.map((u) => ({ ...u, address: `${u.host}:${u.port}` }));
    if (candidates.length === 0 && topology) candidates = topology.allNodes();
    if (candidates.length > 1 && this.classicLastFailed !== null) {
      const others = candidates.filter((c) => c.address !== this.classicLastFailed);
      if (others.length > 0) candidates = others;
    }
    if (candidates.length === 0) return null;
    return candidates[Math.floor(Math.random() * candidates.length)]!;
  }

  private onClassicReady(conn: SubscriberConnection): void {
    if (conn !== this.classic) return;
    this.classicAttempt = 0;
    this.classicLastFailed = null;
    const idle: Entry[] = [];
    for (const map of [this.channels, this.patterns]) for (const e of map.values()) if (e.state === 'idle') idle.push(e);
    if (idle.length > 0) {
      this.log.info({ node: conn.address, names: idle.length }, 'pub/sub: subscribing channels and patterns upstream');
      this.sendSubscribe(conn, idle);
    }
    this.scheduleIdleChecks();
  }

  private onClassicClosed(conn: SubscriberConnection, reason: string): void {
    this.outbox.delete(conn);
    if (conn !== this.classic) return;
    this.classic = null;
    this.classicLastFailed = conn.address;
    if (this.classicIdleTimer) clearTimeout(this.classicIdleTimer);
    this.classicIdleTimer = null;
    const held = this.channels.size + this.patterns.size;
    for (const map of [this.channels, this.patterns]) for (const e of map.values()) this.deactivate(e);
    if (this.closed || held === 0) return;
    this.reconcileNodes(); // until a new classic connection, every primary's keyspace events come from node connections
    this.log.warn({ node: conn.address, reason, names: held }, 'pub/sub: classic subscriber connection lost; re-subscribing elsewhere');
    this.scheduleClassicReconnect(reason);
  }

  private scheduleClassicReconnect(reason: string): void {
    if (this.classicTimer !== null || this.closed) return;
    const { backoffBaseMs, backoffCapMs } = this.config.resilience;
    const delay = fullJitterDelay(backoffBaseMs, backoffCapMs, this.classicAttempt++);
    this.log.debug({ delay, reason }, 'pub/sub: classic reconnect scheduled');
    this.classicTimer = setTimeout(() => {
      this.classicTimer = null;
      if (this.channels.size + this.patterns.size === 0) return;
      const conn = this.ensureClassic();
      // Entries are sent on 'ready'; a dial that cannot start retries through onClassicClosed.
      void conn;
    }, delay);
    this.classicTimer.unref();
  }

  // ---- node connections (keyspace notifications of the other primaries) ----------------------

  /**
   * The primaries that need a node connection: in cluster mode, the primary of every shard
   * serving slots but the classic node's own shard (the classic node may be a replica, after a
   * failover or when no primary was healthy: a replica sees its shard's keyspace events too).
   */
  private nodeTargets(): Map<string, { host: string; port: number }> {
    const targets = new Map<string, { host: string; port: number }>();
    const topology = this.refresher.current;
    if (topology === null || topology.mode !== 'cluster') return targets;
    const classic = this.classic?.address ?? null;
    for (const shard of topology.shards) {
      const p = shard.primary;
      if (shard.slots.length === 0 || p.health === 'fail' || p.health === 'failed') continue;
      if (classic !== null && (p.address === classic || shard.replicas.some((n) => n.address === classic))) continue;
      targets.set(p.address, { host: p.host, port: p.port });
    }
    return targets;
  }

  /**
   * Node connections follow the topology and the classic node: dropped where no longer wanted,
   * dialed where wanted while node-wide entries exist (unless backing off).
   */
  private reconcileNodes(): void {
    if (this.closed) return;
    const targets = this.nodeTargets();
    for (const x of [...this.nodes.values()]) {
      if (!targets.has(x.address)) this.dropNode(x, 'no longer a primary needing keyspace events');
    }
    if (this.nodeWideCount === 0) return;
    for (const [address, node] of targets) {
      let x = this.nodes.get(address);
      if (x === undefined) {
        x = { address, host: node.host, port: node.port, conn: null, held: new Map(), attempt: 0, retryTimer: null, idleTimer: null };
        this.nodes.set(address, x);
      }
      if (x.conn === null && x.retryTimer === null) this.dialNode(x);
    }
  }

  private dialNode(x: NodeSubscriber): void {
    const conn = this.connect(x.host, x.port, {
      ready: () => {
        if (x.conn === conn) x.attempt = 0;
      },
      message: (c, kind, pattern, channel, frame) => this.onNodeMessage(x, c, kind, pattern, channel, frame),
      shardChannelDropped: () => {},
      closed: (c, reason) => this.onNodeClosed(x, c, reason),
    });
    x.conn = conn;
    x.held.clear();
    this.log.debug({ node: x.address }, 'pub/sub: node subscriber connection dialing (keyspace events)');
    const wide: Entry[] = [];
    for (const map of [this.channels, this.patterns]) for (const e of map.values()) if (e.nodeWide) wide.push(e);
    if (wide.length > 0) this.sendNodeWide(wide, x);
  }

  /** Subscribes node-wide entries on every node connection that is up (or on `only`), skipping those it holds. */
  private sendNodeWide(entries: Entry[], only?: NodeSubscriber): void {
    if (only === undefined) this.reconcileNodes();
    for (const x of only !== undefined ? [only] : this.nodes.values()) {
      const conn = x.conn;
      if (conn === null || conn.state === 'closed') continue;
      const todo = entries.filter((e) => !e.dead && !x.held.has(e));
      if (todo.length === 0) continue;
      if (x.idleTimer !== null) {
        clearTimeout(x.idleTimer);
        x.idleTimer = null;
      }
      if (this.outbox.has(conn)) this.flushOutbox();
      for (const e of todo) x.held.set(e, 'subscribing');
      for (const kind of ['channel', 'pattern'] as const) {
        const list = todo.filter((e) => e.kind === kind);
        for (let i = 0; i < list.length; i += MAX_NAMES_PER_COMMAND) {
          const batch = list.slice(i, i + MAX_NAMES_PER_COMMAND);
          conn.send(SUBSCRIBE_COMMAND[kind], batch.map((e) => e.name), {
            confirmed: (j) => {
              const e = batch[j]!;
              if (x.conn !== conn || x.held.get(e) !== 'subscribing') return;
              x.held.set(e, 'active');
              this.refreshReady(e);
            },
            failed: (error, connectionLost) => {
              if (!connectionLost) this.onNodeRefused(x, conn, batch, error);
            },
          });
        }
      }
      for (const e of todo) if (e.ready) this.refreshReady(e); // no longer confirmed everywhere
    }
  }

  private onNodeRefused(x: NodeSubscriber, conn: SubscriberConnection, batch: Entry[], error: string): void {
    const live = batch.filter((e) => !e.dead && x.conn === conn && x.held.get(e) === 'subscribing');
    if (live.length === 0) return;
    this.log.warn({ node: conn.address, error, names: live.length }, 'upstream refused a subscription (keyspace events)');
    let keepsReceivers = false;
    for (const e of live) {
      x.held.delete(e);
      for (const r of [...e.waiting]) this.fail(r, error);
      if (!e.dead) keepsReceivers = true; // held by clients already: start over on a fresh connection
    }
    if (keepsReceivers) conn.close(`re-subscribe refused: ${error}`);
  }

  private onNodeClosed(x: NodeSubscriber, conn: SubscriberConnection, reason: string): void {
    this.outbox.delete(conn);
    if (x.conn !== conn) return;
    x.conn = null;
    const held = x.held.size;
    x.held.clear();
    this.refreshNodeWide(); // not waited for while it is down
    if (this.closed || this.nodes.get(x.address) !== x) return;
    if (this.nodeWideCount === 0) {
      this.nodes.delete(x.address);
      if (x.idleTimer !== null) clearTimeout(x.idleTimer);
      return;
    }
    this.log.warn({ node: x.address, reason, names: held }, 'pub/sub: node subscriber connection lost; re-subscribing');
    const { backoffBaseMs, backoffCapMs } = this.config.resilience;
    const delay = fullJitterDelay(backoffBaseMs, backoffCapMs, x.attempt++);
    x.retryTimer = setTimeout(() => {
      x.retryTimer = null;
      if (this.nodes.get(x.address) === x) this.reconcileNodes();
    }, delay);
    x.retryTimer.unref();
  }

  /** Closes and forgets a node connection (no longer wanted, idle, closing). */
  private dropNode(x: NodeSubscriber, reason: string): void {
    if (this.nodes.get(x.address) === x) this.nodes.delete(x.address);
    if (x.retryTimer !== null) clearTimeout(x.retryTimer);
    if (x.idleTimer !== null) clearTimeout(x.idleTimer);
    x.retryTimer = x.idleTimer = null;
    const conn = x.conn;
    x.conn = null;
    const held = x.held.size;
    x.held.clear();
    if (conn !== null) {
      this.log.debug({ node: x.address, reason }, 'pub/sub: node subscriber connection closed');
      conn.close(reason);
    }
    if (held > 0) this.refreshNodeWide();
  }

  private refreshNodeWide(): void {
    if (this.nodeWideCount === 0) return;
    for (const map of [this.channels, this.patterns]) for (const e of [...map.values()]) if (e.nodeWide) this.refreshReady(e);
  }

  // ---- shard channels ------------------------------------------------------------------------

  private sendShardSubscribe(entries: Entry[]): void {
    const topology = this.refresher.current;
    for (const e of entries) {
      const owner = topology?.primaryForSlot(e.slot);
      if (owner === undefined) {
        this.forget(e);
        for (const r of [...e.waiting]) this.fail(r, ProxyError.slotNotServed(e.slot));
      }
    }
    const live = entries.filter((e) => !e.dead);
    if (live.length === 0) return;
    // One request's shard names share a slot (cluster) or the one server (standalone): one node.
    const owner = topology!.primaryForSlot(live[0]!.slot)!;
    this.attachShard(this.shardConn(owner.host, owner.port), live);
  }

  private attachShard(conn: SubscriberConnection, entries: Entry[]): void {
    let set = this.shardEntries.get(conn);
    if (set === undefined) this.shardEntries.set(conn, (set = new Set()));
    for (const e of entries) set.add(e);
    const idle = this.shardIdleTimers.get(conn);
    if (idle !== undefined) {
      clearTimeout(idle);
      this.shardIdleTimers.delete(conn);
    }
    this.sendSubscribe(conn, entries);
  }

  private shardConn(host: string, port: number): SubscriberConnection {
    const address = `${host}:${port}`;
    let conn = this.shardConns.get(address);
    if (conn === undefined || conn.state === 'closed') {
      conn = this.connect(host, port, this.shardHandler);
      this.shardConns.set(address, conn);
    }
    return conn;
  }

  /** A MOVED refusal of SSUBSCRIBE: follow it (within cluster.maxRedirects) and refresh the topology. */
  private redirectShard(entries: Entry[], error: string): boolean {
    const target = error.split(' ')[2] ?? '';
    const colon = target.lastIndexOf(':');
    const host = target.slice(0, colon);
    const port = Number(target.slice(colon + 1));
    this.refresher.requestRefresh('moved');
    if (colon <= 0 || !(port > 0) || entries.some((e) => e.redirects >= this.config.cluster.maxRedirects)) return false;
    for (const e of entries) {
      if (e.conn !== null) this.shardEntries.get(e.conn)?.delete(e);
      e.redirects++;
    }
    this.attachShard(this.shardConn(host, port), entries);
    return true;
  }

  /** Valkey dropped a shard channel on its own (slot moved away, node became a replica elsewhere). */
  private onShardDropped(conn: SubscriberConnection, key: string): void {
    const e = this.shards.get(key);
    if (e === undefined || e.conn !== conn || e.state !== 'active') return;
    this.log.info({ node: conn.address, channel: key }, 'pub/sub: upstream dropped a shard channel');
    this.lose(e, false);
  }

  private onShardConnClosed(conn: SubscriberConnection, reason: string): void {
    this.outbox.delete(conn);
    if (this.shardConns.get(conn.address) === conn) this.shardConns.delete(conn.address);
    const idle = this.shardIdleTimers.get(conn);
    if (idle !== undefined) clearTimeout(idle);
    this.shardIdleTimers.delete(conn);
    const entries = this.shardEntries.get(conn);
    this.shardEntries.delete(conn);
    if (entries === undefined || entries.size === 0 || this.closed) return;
    this.log.warn({ node: conn.address, reason, channels: entries.size }, 'pub/sub: shard subscriber connection lost');
    const error = ProxyError.upstreamUnavailable(conn.address, reason);
    for (const e of entries) {
      if (e.dead) continue;
      for (const r of [...e.waiting]) this.fail(r, error);
      if (!e.dead) this.lose(e, false);
    }
  }

  /**
   * Respool no longer holds shard channel e: drop it and tell every receiver. `unsubscribe`:
   * also SUNSUBSCRIBE it upstream (respool decided, Valkey still holds it).
   */
  private lose(e: Entry, unsubscribe: boolean): void {
    if (e.dead) return;
    const conn = e.conn;
    this.forget(e);
    if (unsubscribe && conn !== null && conn.state !== 'closed') this.queueUnsubscribe(conn, 'sunsubscribe', e.name);
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

  /** A new topology: shard channels held on a node outside their slot's shard are lost. */
  private onTopology(topology: Topology): void {
    for (const [conn, entries] of this.shardEntries) {
      for (const e of [...entries]) {
        if (e.state !== 'active') continue; // a SSUBSCRIBE in flight is answered (or MOVED) by the node itself
        const shard = topology.shardForSlot(e.slot);
        const serves = shard !== undefined && [shard.primary, ...shard.replicas].some((n) => n.address === conn.address);
        if (!serves) {
          this.log.info({ node: conn.address, channel: e.key }, 'pub/sub: shard channel slot moved');
          this.lose(e, true);
        }
      }
    }
    this.reconcileNodes();
  }

  // ---- messages ------------------------------------------------------------------------------

  private onMessage(conn: SubscriberConnection, kind: MessageKind, pattern: string | null, channel: string, frame: Buffer): void {
    const e = kind === 'message' ? this.channels.get(channel) : kind === 'pmessage' ? this.patterns.get(pattern!) : this.shards.get(channel);
    if (e === undefined || e.conn !== conn || e.receivers.size === 0) return;
    this.fanOut(e, frame);
  }

  /** A message from a node connection: only keyspace notifications (that node's keys); PUBLISH comes from the classic connection. */
  private onNodeMessage(x: NodeSubscriber, conn: SubscriberConnection, kind: MessageKind, pattern: string | null, channel: string, frame: Buffer): void {
    if (x.conn !== conn || kind === 'smessage' || !isKeyspaceChannel(channel)) return;
    const e = kind === 'message' ? this.channels.get(channel) : this.patterns.get(pattern!);
    if (e === undefined || !x.held.has(e) || e.receivers.size === 0) return;
    this.fanOut(e, frame);
  }

  private fanOut(e: Entry, frame: Buffer): void {
    let resp2: Buffer | null = null;
    for (const sub of e.receivers) {
      if (sub.closed) continue;
      if (sub.protocol === 3) {
        sub.deliver(frame);
      } else {
        if (resp2 === null) {
          resp2 = Buffer.from(frame);
          resp2[0] = 0x2a; // '>' push → '*' array: the rest of the frame is the same in RESP2
        }
        sub.deliver(resp2);
      }
    }
  }

  // ---- plumbing ------------------------------------------------------------------------------

  private connect(host: string, port: number, handler: SubscriberConnectionHandler): SubscriberConnection {
    const { timeouts, upstreamAuth, limits } = this.config;
    return new SubscriberConnection(
      {
        host, port, auth: upstreamAuth, tls: this.config.upstreamTls ?? null,
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

  private queueUnsubscribe(conn: SubscriberConnection, command: UpstreamSubscribeCommand, name: Buffer): void {
    let byCommand = this.outbox.get(conn);
    if (byCommand === undefined) this.outbox.set(conn, (byCommand = new Map()));
    let names = byCommand.get(command);
    if (names === undefined) byCommand.set(command, (names = []));
    names.push(name);
    if (this.outboxScheduled) return;
    this.outboxScheduled = true;
    queueMicrotask(() => this.flushOutbox());
  }

  private flushOutbox(): void {
    this.outboxScheduled = false;
    const outbox = this.outbox;
    this.outbox = new Map();
    for (const [conn, byCommand] of outbox) {
      if (conn.state === 'closed') continue;
      for (const [command, names] of byCommand) {
        for (let i = 0; i < names.length; i += MAX_NAMES_PER_COMMAND) {
          conn.send(command, names.slice(i, i + MAX_NAMES_PER_COMMAND), {
            confirmed: () => {},
            failed: (error, lost) => {
              if (!lost) this.log.warn({ node: conn.address, command, error }, 'pub/sub: upstream refused an unsubscribe');
            },
          });
        }
      }
    }
  }

  /** Connections left with nothing subscribed are closed after PubSubHub.idleCloseMs. */
  private scheduleIdleChecks(): void {
    if (this.closed) return;
    if (this.nodeWideCount === 0) {
      for (const x of this.nodes.values()) {
        if (x.idleTimer !== null) continue;
        x.idleTimer = setTimeout(() => {
          x.idleTimer = null;
          if (this.nodeWideCount === 0 && this.nodes.get(x.address) === x) this.dropNode(x, 'idle');
        }, PubSubHub.idleCloseMs);
        x.idleTimer.unref();
      }
    }
    if (this.classic !== null && this.channels.size + this.patterns.size === 0 && this.classicIdleTimer === null) {
      this.classicIdleTimer = setTimeout(() => {
        this.classicIdleTimer = null;
        if (this.classic !== null && this.channels.size + this.patterns.size === 0) {
          const conn = this.classic;
          this.classic = null;
          conn.close('idle');
        }
      }, PubSubHub.idleCloseMs);
      this.classicIdleTimer.unref();
    }
    for (const [conn, entries] of this.shardEntries) {
      if (entries.size > 0 || this.shardIdleTimers.has(conn)) continue;
      const timer = setTimeout(() => {
        this.shardIdleTimers.delete(conn);
        if ((this.shardEntries.get(conn)?.size ?? 0) === 0) {
          this.shardEntries.delete(conn);
          conn.close('idle');
        }
      }, PubSubHub.idleCloseMs);
      timer.unref();
      this.shardIdleTimers.set(conn, timer);
    }
  }

  private mapFor(kind: SubscriptionKind): Map<string, Entry> {
    return kind === 'channel' ? this.channels : kind === 'pattern' ? this.patterns : this.shards;
  }
}
