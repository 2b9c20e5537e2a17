import type { Factory, Pool } from 'generic-pool';
import { UNBOUNDED_NESTING } from '../resp/limits.js';
import { LeasedConnection } from './leased-connection.js';
import { ProxyError } from '../errors.js';
import type { RespoolConfig } from '../config/types.js';
import type { Metrics } from '../metrics/metrics.js';
import type { LeaseRefusalReason } from '../metrics/metric-definitions.js';
import type { UpstreamIdentity } from '../acl/upstream-identity.js';
import type { IdentityHooks } from './upstream-pools.js';
import { LeaseGate } from './lease-gate.js';
import { leasePool, reconfigureLeasePool } from './lease-generic-pool.js';

/** What LeasePools reads from the configuration (the server passes its RespoolConfig). */
export type LeasePoolsConfig = Pick<RespoolConfig, 'dedicated' | 'upstreamAuth' | 'timeouts' | 'limits'> & Partial<Pick<RespoolConfig, 'upstreamTls'>>;

/**
 * Sends `CLIENT UNBLOCK <clientId>` to the node over some other connection (the server wires it to
 * `UpstreamPools.get(host, port, 2).call(['CLIENT', 'UNBLOCK', id])`). Rejects if that failed.
 */
export type UnblockFn = (host: string, port: number, clientId: number) => Promise<void>;

export interface LeasePoolsOptions {
  metrics?: Metrics;
  /** After abandon(): how long to wait for the outstanding reply before closing. Default 1000 ms. */
  abandonGraceMs?: number;
}

/** Per node address (both protocols): what the leased-connection gauges show. */
export interface LeaseNodeStats {
  /** Leased to a client, or being handed back after abandon(). */
  inUse: number;
  /** Open, unleased, kept for reuse. */
  idle: number;
  /** Dials in progress. */
  creating: number;
  /** acquire() calls parked at a bound. */
  waiting: number;
}

export interface LeaseStats {
  /** Connections counted against dedicated.maxTotal: leased + idle + being created. */
  total: number;
  byNode: Record<string, LeaseNodeStats>;
  refusals: Record<LeaseRefusalReason, number>;
}

/** One generic-pool (node address, protocol, database, identity). */
interface NodeLeases {
  readonly key: string;
  readonly host: string;
  readonly port: number;
  readonly address: string;
  readonly protocol: 2 | 3;
  /** The database its connections open in (and must be in when handed back, to be reused). */
  readonly db: number;
  /** Whom its connections authenticate as: a user's upstream identity, or null for respool's own. */
  readonly identity: UpstreamIdentity | null;
  readonly pool: Pool<LeasedConnection>;
  /** Its dials waiting at the process-wide gate (dedicated.maxTotal): what a timed-out acquire names. */
  gateWaits: number;
}

interface Lease {
  readonly node: NodeLeases;
  abandoning: boolean;
}

const ABANDON_GRACE_MS = 1000;

/**
 * Leased upstream connections (WATCH … EXEC, blocking commands): one generic-pool per node
 * address, protocol, database (a standalone upstream's databases ≠ 0: connections opened
 * with SELECT n) and upstream identity (a user's own, src/acl/upstream-identity.ts), created on
 * demand, behind one gate for the whole process.
 *
 *   per pool   : generic-pool owns it — leased + idle + dialing ≤ max (dedicated.maxPerNode), its
 *                FIFO of waiting acquires, each refused after acquireTimeoutMillis
 *                (dedicated.acquireTimeoutMs) with an error naming the bound — never a hang —
 *                unless its caller keeps waiting (KeepWaiting: a blocking command, which waits
 *                as long as it would block, then gets its timeout reply: handlers/blocking-call.ts)
 *                Pools are per node, protocol and database: a node leased in several databases
 *                may hold maxPerNode for each
 *   per process: the LeaseGate (lease-gate.ts) — a dial takes one of dedicated.maxTotal places
 *                before it starts (generic-pool's create waits for it, FIFO) and gives it back
 *                when its connection is destroyed. A dial waiting there makes a pool nobody waits
 *                on close one of its idle connections for it (reclaim); a dial granted after its
 *                acquire gave up is not made
 *   dials      : factory.create() rejects only for a dial no longer wanted (nobody waits, so
 *                generic-pool does not dial again); a failed dial resolves with the failed
 *                connection, which the acquire it reaches destroys and rejects with
 *                ProxyError.upstreamUnavailable (a rejected create would make generic-pool re-dial
 *                in a tight loop while anyone waits)
 *   borrow     : testOnBorrow: an idle connection that closed is destroyed instead of lent
 *   leases     : every borrowed connection is in `leases` until release()/abandon() hands it
 *                back: clean and validated (ready, nothing in flight, still in its pool's
 *                database) → idle for reuse; else destroyed. Idle connections are evicted
 *                after idleMs, and at once (next eviction run) when they close.
 */
/**
 * Asked when a wait for a lease reaches dedicated.acquireTimeoutMs: true to wait on (a blocking
 * command whose own timeout has not passed and that nobody cancelled), false to be refused.
 */
export type KeepWaiting = () => boolean;

export class LeasePools {
  private readonly nodes = new Map<string, NodeLeases>();
  private readonly leases = new Map<LeasedConnection, Lease>();
  /** Every connection any pool holds (dialing, idle, leased), for closeAll(). */
  private readonly connections = new Set<LeasedConnection>();
  private readonly gate: LeaseGate;
  /** Idle connections being closed to make room under maxTotal for another pool. */
  private reclaiming = 0;
  private reclaimScheduled = false;
  private closed = false;
  private readonly refusals: Record<LeaseRefusalReason, number> = {
    max_per_node: 0,
    max_total: 0,
    upstream_unavailable: 0,
    shutting_down: 0,
  };
  private readonly metrics: Metrics | undefined;
  /** Nodes whose lease counts changed since the gauges were last set (publishChanged, at scrape time). */
  private readonly changed = new Set<string>();
  private readonly abandonGraceMs: number;
  /** Set by the server: the identity mirror (identity connections make sure their user exists first). */
  identityHooks: IdentityHooks | null = null;

  constructor(
    private readonly config: LeasePoolsConfig,
    private readonly unblock: UnblockFn,
    options: LeasePoolsOptions = {},
  ) {
    this.metrics = options.metrics;
    this.abandonGraceMs = options.abandonGraceMs ?? ABANDON_GRACE_MS;
    this.gate = new LeaseGate(() => this.config.dedicated.maxTotal);
    this.metrics?.leasedConnectionsAtScrape(() => this.publishChanged());
  }

  /**
   * A ready connection to host:port speaking `protocol`, in database `db` (0 unless a
   * standalone client SELECTed another), leased to the caller until release() or abandon().
   * Rejects (never hangs) with:
   *  - ProxyError.leaseLimitReached when dedicated.maxPerNode or maxTotal stayed reached for
   *    dedicated.acquireTimeoutMs;
   *  - ProxyError.upstreamUnavailable when dialing the node failed;
   *  - ProxyError.shuttingDown after closeAll().
   */
  acquire(host: string, port: number, protocol: 2 | 3, db = 0, identity: UpstreamIdentity | null = null, keepWaiting: KeepWaiting | null = null): Promise<LeasedConnection> {
    if (this.closed) {
      this.refuse('shutting_down');
      return Promise.reject(new Error(ProxyError.shuttingDown()));
    }
    return this.lend(this.node(host, port, protocol, db, identity), keepWaiting);
  }

  private lend(node: NodeLeases, keepWaiting: KeepWaiting | null): Promise<LeasedConnection> {
    const lent = node.pool.acquire();
    this.publish(node.address); // waiting, while it waits
    return lent.then(
      (conn) => this.onLent(node, conn, keepWaiting),
      (err: Error) => {
        // A blocking command waits its own time for a lease (handlers/blocking-call.ts): at the
        // bound, in the queue again (at its back) rather than refused after acquireTimeoutMs.
        if (err.name === 'TimeoutError' && !this.closed && keepWaiting?.() === true) return this.lend(node, keepWaiting);
        throw this.refusal(node, err);
      },
    );
  }

  private onLent(node: NodeLeases, conn: LeasedConnection, keepWaiting: KeepWaiting | null): LeasedConnection | Promise<LeasedConnection> {
    if (this.closed) {
      node.pool.destroy(conn).catch(() => {});
      this.refuse('shutting_down');
      throw new Error(ProxyError.shuttingDown());
    }
    if (conn.state === 'ready' && conn.inflightCount === 0) {
      this.leases.set(conn, { node, abandoning: false });
      this.publish(node.address);
      return conn;
    }
    node.pool.destroy(conn).catch(() => {});
    if (!conn.wasReady) {
      // The dial failed (refused, connect timeout, handshake error).
      this.refuse('upstream_unavailable');
      throw new Error(ProxyError.upstreamUnavailable(node.address, conn.closeReason));
    }
    return this.lend(node, keepWaiting); // it closed between its check and now: ask again
  }


  /** Why an acquire was refused: its bound after acquireTimeoutMs, or closing. */
  private refusal(node: NodeLeases, err: Error): Error {
    this.publish(node.address);
    if (this.closed || err.name !== 'TimeoutError') {
      this.refuse('shutting_down');
      return new Error(this.closed ? ProxyError.shuttingDown() : ProxyError.upstreamUnavailable(node.address, err.message));
    }
    const { maxPerNode, maxTotal, acquireTimeoutMs } = this.config.dedicated;
    // A dial of this pool waits at the process-wide gate: maxTotal was in the way, else the pool's own bound.
    const reason = node.gateWaits > 0 ? 'max_total' : 'max_per_node';
    this.refuse(reason);
    return new Error(
      reason === 'max_per_node'
        ? ProxyError.leaseLimitReached(node.address, acquireTimeoutMs, 'dedicated.maxPerNode', maxPerNode)
        : ProxyError.leaseLimitReached(node.address, acquireTimeoutMs, 'dedicated.maxTotal', maxTotal),
    );
  }

  /**
   * Hands a leased connection back. `clean`: the caller left it in a known state (no WATCH, no
   * MULTI, not subscribed, nothing outstanding); it is kept for reuse if it is also still ready
   * with nothing in flight, in the database of its pool (`conn.db`). Otherwise it is closed.
   * Releasing twice, or after closeAll(), does nothing.
   */
  release(conn: LeasedConnection, clean: boolean): void {
    const lease = this.leases.get(conn);
    if (lease === undefined || lease.abandoning) return;
    this.leases.delete(conn);
    conn.onPush = null;
    conn.onStream = null;
    conn.setDeadline(null);
    const pool = lease.node.pool;
    if (clean && !this.closed && conn.state === 'ready' && conn.inflightCount === 0 && conn.db === lease.node.db) {
      pool.release(conn).catch(() => {});
    } else {
      pool.destroy(conn).catch(() => {});
    }
    this.publish(lease.node.address);
    this.scheduleReclaim(); // an idle connection now: a dial waiting at the gate may take its place
  }

  /**
   * The client went away while a request is outstanding on `conn` (e.g. blocked in BLPOP):
   * CLIENT UNBLOCK it through the `unblock` callback, then release it clean once every
   * outstanding reply has come (the replies still go to their requests, which the caller
   * ignores), or close it if that takes longer than the grace period (1 s) or the unblock fails.
   * With nothing outstanding it is released clean at once.
   */
  abandon(conn: LeasedConnection): void {
    const lease = this.leases.get(conn);
    if (lease === undefined || lease.abandoning) return;
    if (conn.state !== 'ready') {
      this.release(conn, false);
      return;
    }
    if (conn.inflightCount === 0) {
      this.release(conn, true);
      return;
    }
    lease.abandoning = true;
    conn.setDeadline(null);
    let finished = false;
    const finish = (clean: boolean): void => {
      if (finished) return;
      finished = true;
      clearTimeout(timer);
      conn.off('settled', onSettled);
      conn.off('close', onClose);
      lease.abandoning = false;
      this.release(conn, clean);
    };
    const onSettled = (): void => finish(true);
    const onClose = (): void => finish(false);
    const timer = setTimeout(() => finish(false), this.abandonGraceMs);
    conn.on('settled', onSettled);
    conn.once('close', onClose);
    let unblocking: Promise<void>;
    try {
      unblocking = this.unblock(conn.host, conn.port, conn.clientId);
    } catch {
      finish(false);
      return;
    }
    unblocking.catch(() => finish(false));
  }

  /** Leased (in use or idle) connections per respool user with an upstream identity. */
  identityLeases(): Map<string, number> {
    const out = new Map<string, number>();
    for (const node of this.nodes.values()) {
      if (node.identity === null) continue;
      out.set(node.identity.user, (out.get(node.identity.user) ?? 0) + node.pool.size);
    }
    return out;
  }

  /** Counts for gauges, tests and /topology. */
  stats(): LeaseStats {
    const byNode: Record<string, LeaseNodeStats> = {};
    for (const node of this.nodes.values()) {
      const s = (byNode[node.address] ??= { inUse: 0, idle: 0, creating: 0, waiting: 0 });
      this.addNodeStats(node, s);
    }
    return { total: this.gate.used, byNode, refusals: { ...this.refusals } };
  }

  /**
   * Closes every connection to a node not in `keep` (a migration's cutover, src/migration: a
   * transaction or blocked call still on the old upstreams ends with the connection's error rather
   * than writing there). Their pools stay: the nodes are no longer routed to.
   */
  closeOutside(keep: ReadonlySet<string>, reason: string): number {
    let closed = 0;
    for (const conn of this.connections) {
      if (keep.has(conn.address)) continue;
      conn.close(reason);
      closed++;
    }
    return closed;
  }

  /** Closes every connection (leased ones too: their requests fail) and refuses every waiter. */
  async closeAll(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    // Dials waiting at the gate go ahead: each opens a connection closed at once, which the acquire
    // it reaches refuses (shutting down); acquires waiting at a pool's own bound are served that
    // way once the leases below are destroyed.
    this.gate.close();
    for (const conn of this.connections) conn.close('respool is closing');
    for (const [conn, lease] of this.leases) {
      lease.abandoning = false;
      this.release(conn, false);
    }
    await Promise.all(
      [...this.nodes.values()].map(async (node) => {
        await node.pool.drain();
        await node.pool.clear();
      }),
    );
    for (const address of new Set([...this.nodes.values()].map((n) => n.address))) this.publish(address);
  }

  // ---- pools and the gate ------------------------------------------------------------------------

  private node(host: string, port: number, protocol: 2 | 3, db: number, identity: UpstreamIdentity | null): NodeLeases {
    let key = db === 0 ? `${host}:${port}/${protocol}` : `${host}:${port}/${protocol}/${db}`;
    if (identity !== null) key += `#${identity.key}`;
    let node = this.nodes.get(key);
    const { maxPerNode, idleMs, acquireTimeoutMs } = this.config.dedicated;
    if (node === undefined) {
      const address = `${host}:${port}`;
      const factory: Factory<LeasedConnection> = {
        create: () => this.dial(node!),
        destroy: async (conn) => this.onDestroyed(conn, address),
        // An idle connection that closed is not lent; a failed fresh dial is, so its acquire learns why.
        validate: async (conn) => (conn.state === 'ready' ? conn.inflightCount === 0 : !conn.wasReady),
      };
      const pool = leasePool(factory, { maxPerNode, acquireTimeoutMs, idleMs });
      node = { key, host, port, address, protocol, db, identity, pool, gateWaits: 0 };
      this.nodes.set(key, node);
    } else {
      reconfigureLeasePool(node.pool, { maxPerNode, acquireTimeoutMs, idleMs }); // a reload may have changed dedicated.*
      this.gate.admit(); // maxTotal may have grown
    }
    return node;
  }

  /**
   * generic-pool's create: a place at the gate first (waiting, FIFO, past maxTotal), then the
   * dial. Rejects only when the place came after every acquire of this pool gave up.
   */
  private dial(node: NodeLeases): Promise<LeasedConnection> {
    return new Promise<LeasedConnection>((resolve, reject) => {
      const granted = (): void => {
        node.gateWaits--;
        this.publish(node.address);
        if (!this.closed && node.pool.pending === 0) {
          this.gate.give(); // nobody waits for this dial any more: the place goes on
          reject(new Error('lease no longer wanted'));
          return;
        }
        resolve(this.open(node));
      };
      if (this.gate.take(granted)) return resolve(this.open(node));
      node.gateWaits++;
      this.publish(node.address);
      this.scheduleReclaim();
    });
  }

  /** Dials waiting at the gate make pools nobody waits on close idle connections for them (one per dial). */
  private scheduleReclaim(): void {
    if (this.reclaimScheduled || this.closed || this.gate.queued === 0) return;
    this.reclaimScheduled = true;
    // setImmediate, not a microtask: generic-pool files a returned connection as idle a few
    // promise ticks after release() returns; the reclaim must see it.
    setImmediate(() => {
      this.reclaimScheduled = false;
      if (this.closed) return;
      while (this.reclaiming < this.gate.queued && this.reclaimIdle()) this.reclaiming++;
    });
  }

  /** Closes one idle connection of a pool nobody waits on; false if there is none. */
  private reclaimIdle(): boolean {
    for (const node of this.nodes.values()) {
      if (node.pool.pending > 0 || node.pool.available === 0) continue;
      node.pool.acquire().then(
        (conn) => {
          this.reclaiming--;
          node.pool.destroy(conn).catch(() => {});
        },
        () => {
          this.reclaiming--;
        },
      );
      return true;
    }
    return false;
  }

  // ---- the connections ------------------------------------------------------------------------

  /** The dial, once it holds a place at the gate: resolves with the connection, open or failed (never rejects). */
  private async open(node: NodeLeases): Promise<LeasedConnection> {
    const { host, port, protocol, db, identity } = node;
    const hooks = this.identityHooks;
    const address = `${host}:${port}`;
    const conn = new LeasedConnection({
      host,
      port,
      protocol,
      db,
      auth: identity === null ? this.config.upstreamAuth : { username: identity.username, password: identity.password },
      ...(identity !== null ? { identity: true } : {}),
      ...(identity !== null && hooks !== null
        ? { prepare: () => hooks.prepare(identity, address), onAuthRefused: () => hooks.refused(identity, address) }
        : {}),
      tls: this.config.upstreamTls ?? null,
      connectTimeoutMs: this.config.timeouts.connectMs,
      framerLimits: {
        maxBulkLength: this.config.limits.maxBulkLength,
        maxArrayLength: this.config.limits.maxArrayLength,
        maxNestingDepth: UNBOUNDED_NESTING, // resp/limits.ts: replies of any depth
      },
    });
    this.connections.add(conn);
    if (this.closed) conn.close('respool is closing');
    this.publish(address);
    try {
      await conn.opened;
      this.metrics?.linkConnectCounter(address, 'ok').inc();
      const links = this.metrics?.upstreamLinksGauge(address, protocol === 3 ? 'resp3' : 'resp2', 'dedicated');
      links?.inc();
      conn.once('close', () => links?.dec());
    } catch {
      this.metrics?.linkConnectCounter(address, conn.closeReason.startsWith('connect timeout') ? 'timeout' : 'failed').inc();
    }
    return conn;
  }

  /** generic-pool's destroy: closes the socket and gives the connection's place back. */
  private onDestroyed(conn: LeasedConnection, address: string): void {
    conn.close('lease closed by respool');
    if (this.connections.delete(conn)) this.gate.give();
    this.leases.delete(conn);
    this.publish(address);
  }

  // ---- counters -------------------------------------------------------------------------------

  private addNodeStats(node: NodeLeases, s: LeaseNodeStats): void {
    const pool = node.pool;
    const creating = Math.max(0, pool.size - pool.borrowed - pool.available);
    s.inUse += pool.borrowed;
    s.idle += pool.available;
    s.creating += creating;
    s.waiting += pool.pending;
  }

  private refuse(reason: LeaseRefusalReason): void {
    this.refusals[reason]++;
    this.metrics?.leaseRefusalCounter(reason).inc();
  }

  /** The node's leased_connections gauges (both protocols summed) are due: set at the next scrape (publishChanged). */
  private publish(address: string): void {
    if (this.metrics !== undefined) this.changed.add(address);
  }

  /** At scrape time: the gauges of every node whose leases changed since the last one. */
  private publishChanged(): void {
    for (const address of this.changed) this.publishNow(address);
    this.changed.clear();
  }

  private publishNow(address: string): void {
    const metrics = this.metrics;
    if (metrics === undefined) return;
    const s: LeaseNodeStats = { inUse: 0, idle: 0, creating: 0, waiting: 0 };
    for (const node of this.nodes.values()) if (node.address === address) this.addNodeStats(node, s);
    metrics.leasedConnectionsGauge(address, 'in_use').set(s.inUse);
    metrics.leasedConnectionsGauge(address, 'idle').set(s.idle);
    metrics.leasedConnectionsGauge(address, 'waiting').set(s.waiting);
  }
}
