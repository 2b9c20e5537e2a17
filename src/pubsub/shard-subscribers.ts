import type { Topology } from '../cluster/topology.js';
import { ProxyError } from '../errors.js';
import type { SubscriberConnection, SubscriberConnectionHandler } from './subscriber-connection.js';
import type { Entry, HubCore } from './subscription-entry.js';

/**
 * Shard channels: each on the subscriber connection to the primary owning its slot (one
 * connection per node address).
 *
 *   MOVED   : a refused SSUBSCRIBE is followed to the node it names (parsed by routing/redirect.ts),
 *             at most cluster.maxRedirects times per entry, and a topology refresh is asked for
 *   lost    : the connection dies, or Valkey sends an `sunsubscribe` we did not ask for, or the
 *             topology says the node no longer serves the slot → the entry is dropped and every
 *             receiver gets shardChannelLost(channel) (the hub's lose): respool never lets a
 *             client believe it holds a shard channel it does not
 *   idle    : a connection left with no shard channel closes after PubSubHub.idleCloseMs
 */
export class ShardSubscribers {
  private readonly conns = new Map<string, SubscriberConnection>();
  private readonly entriesOn = new Map<SubscriberConnection, Set<Entry>>();
  private readonly idleTimers = new Map<SubscriberConnection, NodeJS.Timeout>();

  private readonly handler: SubscriberConnectionHandler = {
    ready: () => {},
    message: (conn, kind, pattern, channel, frames, starts) => this.hub.onMessage(conn, kind, pattern, channel, frames, starts),
    shardChannelDropped: (conn, channel) => this.onDropped(conn, channel),
    closed: (conn, reason) => this.onClosed(conn, reason),
    unsubscribeRefused: (conn, command, error) => this.hub.log.warn({ node: conn.address, command, error }, 'pub/sub: upstream refused an unsubscribe'),
  };

  constructor(private readonly hub: HubCore) {}

  /** Connections open or connecting (stats). */
  openCount(): number {
    let n = 0;
    for (const conn of this.conns.values()) if (conn.state !== 'closed') n++;
    return n;
  }

  /** Subscribes fresh shard entries (one request's: one slot) on their slot owner's connection. */
  subscribe(entries: Entry[]): void {
    const topology = this.hub.refresher.current;
    for (const e of entries) {
      const owner = topology?.primaryForSlot(e.slot);
      if (owner === undefined) {
        this.hub.forget(e);
        for (const r of [...e.waiting]) this.hub.fail(r, ProxyError.slotNotServed(e.slot));
      }
    }
    const live = entries.filter((e) => !e.dead);
    if (live.length === 0) return;
    // One request's shard names share a slot (cluster) or the one server (standalone): one node.
    const owner = topology!.primaryForSlot(live[0]!.slot)!;
    this.attach(this.connTo(owner.host, owner.port), live);
  }

  /** `e` is no longer on `conn` (released, refused). */
  detach(e: Entry, conn: SubscriberConnection): void {
    this.entriesOn.get(conn)?.delete(e);
  }

  /**
   * A MOVED refusal of SSUBSCRIBE: followed to the slot's new owner as the redirect follower
   * decides (routing/redirect-follower.ts: hop bound, topology patch and refresh, counters).
   * False: not followed (an ASK, whose ASKING would not outlast the one SSUBSCRIBE; the bound).
   */
  redirect(entries: Entry[], conn: SubscriberConnection, error: string): boolean {
    const hops = entries.reduce((most, e) => Math.max(most, e.redirects), 0);
    const step = this.hub.redirects.stepForText(error, conn.address, hops, 'ssubscribe');
    if (step === null || step.kind !== 'moved' || !(step.port > 0)) return false;
    for (const e of entries) {
      if (e.conn !== null) this.entriesOn.get(e.conn)?.delete(e);
      e.redirects++;
    }
    this.attach(this.connTo(step.host, step.port), entries);
    return true;
  }

  /** A new topology: shard channels held on a node outside their slot's shard are lost. */
  onTopology(topology: Topology): void {
    for (const [conn, entries] of this.entriesOn) {
      for (const e of [...entries]) {
        if (e.state !== 'active') continue; // a SSUBSCRIBE in flight is answered (or MOVED) by the node itself
        const shard = topology.shardForSlot(e.slot);
        const serves = shard !== undefined && [shard.primary, ...shard.replicas].some((n) => n.address === conn.address);
        if (!serves) {
          this.hub.log.info({ node: conn.address, channel: e.key }, 'pub/sub: shard channel slot moved');
          this.hub.lose(e, true);
        }
      }
    }
  }

  close(): void {
    for (const t of this.idleTimers.values()) clearTimeout(t);
    this.idleTimers.clear();
    for (const conn of [...this.conns.values()]) conn.close('respool closing');
  }

  /** Connections left with no shard channel: closed after `idleCloseMs`. */
  scheduleIdleChecks(idleCloseMs: number): void {
    for (const [conn, entries] of this.entriesOn) {
      if (entries.size > 0 || this.idleTimers.has(conn)) continue;
      const timer = setTimeout(() => {
        this.idleTimers.delete(conn);
        if ((this.entriesOn.get(conn)?.size ?? 0) === 0) {
          this.entriesOn.delete(conn);
          conn.close('idle');
        }
      }, idleCloseMs);
      timer.unref();
      this.idleTimers.set(conn, timer);
    }
  }

  private attach(conn: SubscriberConnection, entries: Entry[]): void {
    let set = this.entriesOn.get(conn);
    if (set === undefined) this.entriesOn.set(conn, (set = new Set()));
    for (const e of entries) set.add(e);
    const idle = this.idleTimers.get(conn);
    if (idle !== undefined) {
      clearTimeout(idle);
      this.idleTimers.delete(conn);
    }
    this.hub.sendSubscribe(conn, entries);
  }

  private connTo(host: string, port: number): SubscriberConnection {
    const address = `${host}:${port}`;
    let conn = this.conns.get(address);
    if (conn === undefined || conn.state === 'closed') {
      conn = this.hub.connect(host, port, this.handler);
      this.conns.set(address, conn);
    }
    return conn;
  }

  /** Valkey dropped a shard channel on its own (slot moved away, node became a replica elsewhere). */
  private onDropped(conn: SubscriberConnection, key: string): void {
    const e = this.hub.entries('shard').get(key);
    if (e === undefined || e.conn !== conn || e.state !== 'active') return;
    this.hub.log.info({ node: conn.address, channel: key }, 'pub/sub: upstream dropped a shard channel');
    this.hub.lose(e, false);
  }

  private onClosed(conn: SubscriberConnection, reason: string): void {
    if (this.conns.get(conn.address) === conn) this.conns.delete(conn.address);
    const idle = this.idleTimers.get(conn);
    if (idle !== undefined) clearTimeout(idle);
    this.idleTimers.delete(conn);
    const entries = this.entriesOn.get(conn);
    this.entriesOn.delete(conn);
    if (entries === undefined || entries.size === 0 || this.hub.closed) return;
    this.hub.log.warn({ node: conn.address, reason, channels: entries.size }, 'pub/sub: shard subscriber connection lost');
    const error = ProxyError.upstreamUnavailable(conn.address, reason);
    for (const e of entries) {
      if (e.dead) continue;
      for (const r of [...e.waiting]) this.hub.fail(r, error);
      if (!e.dead) this.hub.lose(e, false);
    }
  }
}
