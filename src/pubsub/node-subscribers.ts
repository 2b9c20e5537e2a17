import { fullJitterDelay } from '../upstream/backoff.js';
import { MAX_NAMES_PER_COMMAND, type MessageKind, type SubscriberConnection } from './subscriber-connection.js';
import { isKeyspaceChannel, SUBSCRIBE_COMMAND, UNSUBSCRIBE_COMMAND, type Entry, type HubCore } from './subscription-entry.js';

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

/**
 * The node connections. Keyspace notifications (`__keyspace@<db>__:<key>`,
 * `__keyevent@<db>__:<event>`) are published only on the node owning the key; the cluster bus
 * does not carry them. So every node-wide entry (a pattern, or a channel named `__keyspace@…` /
 * `__keyevent@…`) is also subscribed on each primary other than the classic node (one
 * NodeSubscriber per address, dialed while node-wide entries exist, closed when idle), and from
 * those connections only messages on keyspace-notification channels are delivered: a key's event
 * comes once (from its node), a PUBLISH once (from the classic connection). A node-wide entry is
 * ready when active on the classic connection and on every node connection that is up
 * (confirmedEverywhere), so a subscriber confirmed for `*` receives the events of every key after
 * its confirmation. A lost node connection is not waited for (the node's events are lost while it
 * is down) and is re-dialed with a full-jitter backoff; the topology decides which primaries are
 * dialed (added, removed, failed over, the classic connection moved). Standalone: none.
 */
export class NodeSubscribers {
  /** By address. */
  private readonly nodes = new Map<string, NodeSubscriber>();

  constructor(
    private readonly hub: HubCore,
    /** The classic connection's node: its shard needs no node connection. */
    private readonly classicAddress: () => string | null,
  ) {}

  /** Connections open or connecting (stats). */
  openCount(): number {
    let n = 0;
    for (const x of this.nodes.values()) if (x.conn !== null && x.conn.state !== 'closed') n++;
    return n;
  }

  /** Whether `e` (node-wide) is confirmed on every node connection that is up. */
  confirmedEverywhere(e: Entry): boolean {
    for (const x of this.nodes.values()) if (x.conn !== null && x.held.get(e) !== 'active') return false;
    return true;
  }

  /** `e` was released: UNSUBSCRIBE it wherever a node connection holds it. */
  unsubscribe(e: Entry): void {
    for (const x of this.nodes.values()) {
      if (x.held.delete(e) && x.conn !== null && x.conn.state !== 'closed') x.conn.unsubscribeLater(UNSUBSCRIBE_COMMAND[e.kind], e.name);
    }
  }

  close(): void {
    for (const x of [...this.nodes.values()]) this.drop(x, 'respool closing');
  }

  /**
   * The primaries that need a node connection: in cluster mode, the primary of every shard
   * serving slots but the classic node's own shard (the classic node may be a replica, after a
   * failover or when no primary was healthy: a replica sees its shard's keyspace events too).
   */
  private targets(): Map<string, { host: string; port: number }> {
    const targets = new Map<string, { host: string; port: number }>();
    const topology = this.hub.refresher.current;
    if (topology === null || topology.mode !== 'cluster') return targets;
    const classic = this.classicAddress();
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
  reconcile(): void {
    if (this.hub.closed) return;
    const targets = this.targets();
    for (const x of [...this.nodes.values()]) {
      if (!targets.has(x.address)) this.drop(x, 'no longer a primary needing keyspace events');
    }
    if (this.hub.nodeWideCount === 0) return;
    for (const [address, node] of targets) {
      let x = this.nodes.get(address);
      if (x === undefined) {
        x = { address, host: node.host, port: node.port, conn: null, held: new Map(), attempt: 0, retryTimer: null, idleTimer: null };
        this.nodes.set(address, x);
      }
      if (x.conn === null && x.retryTimer === null) this.dial(x);
    }
  }

  private dial(x: NodeSubscriber): void {
    const conn = this.hub.connect(x.host, x.port, {
      ready: () => {
        if (x.conn === conn) x.attempt = 0;
      },
      message: (c, kind, pattern, channel, frames, starts) => this.onMessage(x, c, kind, pattern, channel, frames, starts),
      shardChannelDropped: () => {},
      closed: (c, reason) => this.onClosed(x, c, reason),
      unsubscribeRefused: (c, command, error) => this.hub.log.warn({ node: c.address, command, error }, 'pub/sub: upstream refused an unsubscribe'),
    });
    x.conn = conn;
    x.held.clear();
    this.hub.log.debug({ node: x.address }, 'pub/sub: node subscriber connection dialing (keyspace events)');
    const wide: Entry[] = [];
    for (const kind of ['channel', 'pattern'] as const) for (const e of this.hub.entries(kind).values()) if (e.nodeWide) wide.push(e);
    if (wide.length > 0) this.send(wide, x);
  }

  /** Subscribes node-wide entries on every node connection that is up (or on `only`), skipping those it holds. */
  send(entries: Entry[], only?: NodeSubscriber): void {
    if (only === undefined) this.reconcile();
    for (const x of only !== undefined ? [only] : this.nodes.values()) {
      const conn = x.conn;
      if (conn === null || conn.state === 'closed') continue;
      const todo = entries.filter((e) => !e.dead && !x.held.has(e));
      if (todo.length === 0) continue;
      if (x.idleTimer !== null) {
        clearTimeout(x.idleTimer);
        x.idleTimer = null;
      }
      for (const e of todo) x.held.set(e, 'subscribing');
      for (const kind of ['channel', 'pattern'] as const) {
        const list = todo.filter((e) => e.kind === kind);
        for (let i = 0; i < list.length; i += MAX_NAMES_PER_COMMAND) {
          const batch = list.slice(i, i + MAX_NAMES_PER_COMMAND);
          conn.subscribe(SUBSCRIBE_COMMAND[kind], batch.map((e) => e.name), {
            confirmed: (j) => {
              const e = batch[j]!;
              if (x.conn !== conn || x.held.get(e) !== 'subscribing') return;
              x.held.set(e, 'active');
              this.hub.refreshReady(e);
            },
            failed: (error, connectionLost) => {
              if (!connectionLost) this.onRefused(x, conn, batch, error);
            },
          });
        }
      }
      for (const e of todo) if (e.ready) this.hub.refreshReady(e); // no longer confirmed everywhere
    }
  }

  private onRefused(x: NodeSubscriber, conn: SubscriberConnection, batch: Entry[], error: string): void {
    const live = batch.filter((e) => !e.dead && x.conn === conn && x.held.get(e) === 'subscribing');
    if (live.length === 0) return;
    this.hub.log.warn({ node: conn.address, error, names: live.length }, 'upstream refused a subscription (keyspace events)');
    let keepsReceivers = false;
    for (const e of live) {
      x.held.delete(e);
      for (const r of [...e.waiting]) this.hub.fail(r, error);
      if (!e.dead) keepsReceivers = true; // held by clients already: start over on a fresh connection
    }
    if (keepsReceivers) conn.close(`re-subscribe refused: ${error}`);
  }

  private onClosed(x: NodeSubscriber, conn: SubscriberConnection, reason: string): void {
    if (x.conn !== conn) return;
    x.conn = null;
    const held = x.held.size;
    x.held.clear();
    this.refreshNodeWide(); // not waited for while it is down
    if (this.hub.closed || this.nodes.get(x.address) !== x) return;
    if (this.hub.nodeWideCount === 0) {
      this.nodes.delete(x.address);
      if (x.idleTimer !== null) clearTimeout(x.idleTimer);
      return;
    }
    this.hub.log.warn({ node: x.address, reason, names: held }, 'pub/sub: node subscriber connection lost; re-subscribing');
    const { backoffBaseMs, backoffCapMs } = this.hub.config.resilience;
    const delay = fullJitterDelay(backoffBaseMs, backoffCapMs, x.attempt++);
    x.retryTimer = setTimeout(() => {
      x.retryTimer = null;
      if (this.nodes.get(x.address) === x) this.reconcile();
    }, delay);
    x.retryTimer.unref();
  }

  /** Closes and forgets a node connection (no longer wanted, idle, closing). */
  private drop(x: NodeSubscriber, reason: string): void {
    if (this.nodes.get(x.address) === x) this.nodes.delete(x.address);
    if (x.retryTimer !== null) clearTimeout(x.retryTimer);
    if (x.idleTimer !== null) clearTimeout(x.idleTimer);
    x.retryTimer = x.idleTimer = null;
    const conn = x.conn;
    x.conn = null;
    const held = x.held.size;
    x.held.clear();
    if (conn !== null) {
      this.hub.log.debug({ node: x.address, reason }, 'pub/sub: node subscriber connection closed');
      conn.close(reason);
    }
    if (held > 0) this.refreshNodeWide();
  }

  private refreshNodeWide(): void {
    if (this.hub.nodeWideCount === 0) return;
    for (const kind of ['channel', 'pattern'] as const) for (const e of [...this.hub.entries(kind).values()]) if (e.nodeWide) this.hub.refreshReady(e);
  }

  /** A message from a node connection: only keyspace notifications (that node's keys); PUBLISH comes from the classic connection. */
  private onMessage(x: NodeSubscriber, conn: SubscriberConnection, kind: MessageKind, pattern: string | null, channel: string, frames: Buffer, starts: readonly number[]): void {
    if (x.conn !== conn || kind === 'smessage' || !isKeyspaceChannel(channel)) return;
    const e = kind === 'message' ? this.hub.entries('channel').get(channel) : this.hub.entries('pattern').get(pattern!);
    if (e === undefined || !x.held.has(e) || e.receivers.size === 0) return;
    this.hub.fanOut(e, frames, starts);
  }

  /** No node-wide entry left: each node connection closes after `idleCloseMs`. */
  scheduleIdleChecks(idleCloseMs: number): void {
    if (this.hub.nodeWideCount !== 0) return;
    for (const x of this.nodes.values()) {
      if (x.idleTimer !== null) continue;
      x.idleTimer = setTimeout(() => {
        x.idleTimer = null;
        if (this.hub.nodeWideCount === 0 && this.nodes.get(x.address) === x) this.drop(x, 'idle');
      }, idleCloseMs);
      x.idleTimer.unref();
    }
  }
}
