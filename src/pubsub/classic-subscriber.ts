import { fullJitterDelay } from '../upstream/backoff.js';
import type { SubscriberConnection, SubscriberConnectionHandler } from './subscriber-connection.js';
import type { Entry, HubCore } from './subscription-entry.js';

/**
 * The classic connection: channels and patterns on ONE subscriber connection to one node (any
 * primary: the cluster bus carries PUBLISH everywhere; standalone: the server).
 *
 *   dial    : when the first channel or pattern is wanted, to a healthy primary picked at random
 *             (another one than the node that just failed, if there is one)
 *   ready   : every idle channel and pattern is subscribed on it
 *   dies    : every channel / pattern entry goes idle (receivers kept), and a new connection
 *             re-subscribes them after a full-jitter backoff. Messages in the gap are lost.
 *   idle    : nothing subscribed for PubSubHub.idleCloseMs: closed
 *   moved   : `classicMoved` tells the node connections, which skip the classic node's shard
 */
export class ClassicSubscriber {
  /** The connection (open or connecting); null while backing off or unused. */
  current: SubscriberConnection | null = null;
  private attempt = 0;
  private timer: NodeJS.Timeout | null = null;
  private lastFailed: string | null = null;
  private idleTimer: NodeJS.Timeout | null = null;

  private readonly handler: SubscriberConnectionHandler = {
    ready: (conn) => this.onReady(conn),
    message: (conn, kind, pattern, channel, frames, starts) => this.hub.onMessage(conn, kind, pattern, channel, frames, starts),
    shardChannelDropped: () => {},
    closed: (conn, reason) => this.onClosed(conn, reason),
    unsubscribeRefused: (conn, command, error) => this.hub.log.warn({ node: conn.address, command, error }, 'pub/sub: upstream refused an unsubscribe'),
  };

  constructor(
    private readonly hub: HubCore,
    private readonly classicMoved: () => void,
  ) {}

  /** Subscribes `entries` on the classic connection, dialing it if needed (sent on 'ready' otherwise). */
  send(entries: Entry[]): void {
    const conn = this.ensure();
    if (conn === null) return; // sent when a connection is ready (onReady)
    this.hub.sendSubscribe(conn, entries);
  }

  /** Closes it and its timers (respool closing). */
  close(): void {
    if (this.timer) clearTimeout(this.timer);
    if (this.idleTimer) clearTimeout(this.idleTimer);
    this.current?.close('respool closing');
  }

  /** Nothing subscribed any more: closed after `idleCloseMs`. */
  scheduleIdleCheck(idleCloseMs: number): void {
    if (this.current === null || this.held() > 0 || this.idleTimer !== null) return;
    this.idleTimer = setTimeout(() => {
      this.idleTimer = null;
      if (this.current !== null && this.held() === 0) {
        const conn = this.current;
        this.current = null;
        conn.close('idle');
      }
    }, idleCloseMs);
    this.idleTimer.unref();
  }

  private held(): number {
    return this.hub.entries('channel').size + this.hub.entries('pattern').size;
  }

  /** The classic connection, dialing one if none and no reconnect is pending; null while backing off. */
  private ensure(): SubscriberConnection | null {
    if (this.current !== null) return this.current;
    if (this.timer !== null || this.hub.closed) return null;
    const node = this.pickNode();
    if (node === null) {
      this.scheduleReconnect('no upstream node known');
      return null;
    }
    this.current = this.hub.connect(node.host, node.port, this.handler);
    this.hub.log.debug({ node: this.current.address }, 'pub/sub: classic subscriber connection dialing');
    this.classicMoved(); // the classic node no longer needs a node connection of its own
    return this.current;
  }

  private pickNode(): { host: string; port: number } | null {
    const topology = this.hub.refresher.current;
    let candidates: Array<{ host: string; port: number; address: string }> = topology
      ? topology.primaries().filter((n) => n.health !== 'fail' && n.health !== 'failed')
      : this.hub.config.upstreams.map((u) => ({ ...u, address: `${u.host}:${u.port}` }));
    if (candidates.length === 0 && topology) candidates = topology.allNodes();
    if (candidates.length > 1 && this.lastFailed !== null) {
      const others = candidates.filter((c) => c.address !== this.lastFailed);
      if (others.length > 0) candidates = others;
    }
    if (candidates.length === 0) return null;
    return candidates[Math.floor(Math.random() * candidates.length)]!;
  }

  private onReady(conn: SubscriberConnection): void {
    if (conn !== this.current) return;
    this.attempt = 0;
    this.lastFailed = null;
    const idle: Entry[] = [];
    for (const kind of ['channel', 'pattern'] as const) for (const e of this.hub.entries(kind).values()) if (e.state === 'idle') idle.push(e);
    if (idle.length > 0) {
      this.hub.log.info({ node: conn.address, names: idle.length }, 'pub/sub: subscribing channels and patterns upstream');
      this.hub.sendSubscribe(conn, idle);
    }
    this.hub.scheduleIdleChecks();
  }

  private onClosed(conn: SubscriberConnection, reason: string): void {
    if (conn !== this.current) return;
    this.current = null;
    this.lastFailed = conn.address;
    if (this.idleTimer) clearTimeout(this.idleTimer);
    this.idleTimer = null;
    const held = this.held();
    for (const kind of ['channel', 'pattern'] as const) for (const e of this.hub.entries(kind).values()) this.hub.deactivate(e);
    if (this.hub.closed || held === 0) return;
    this.classicMoved(); // until a new classic connection, every primary's keyspace events come from node connections
    this.hub.log.warn({ node: conn.address, reason, names: held }, 'pub/sub: classic subscriber connection lost; re-subscribing elsewhere');
    this.scheduleReconnect(reason);
  }

  private scheduleReconnect(reason: string): void {
    if (this.timer !== null || this.hub.closed) return;
    const { backoffBaseMs, backoffCapMs } = this.hub.config.resilience;
    const delay = fullJitterDelay(backoffBaseMs, backoffCapMs, this.attempt++);
    this.hub.log.debug({ delay, reason }, 'pub/sub: classic reconnect scheduled');
    this.timer = setTimeout(() => {
      this.timer = null;
      if (this.held() === 0) return;
      // Entries are sent on 'ready'; a dial that cannot start retries through onClosed.
      this.ensure();
    }, delay);
    this.timer.unref();
  }
}
