import genericPool, { type Factory, type Options as GenericPoolOptions, type Pool } from 'generic-pool';
import { UNBOUNDED_NESTING } from '../resp/limits.js';
import { DedicatedConnection } from './dedicated-connection.js';
import { ProxyError } from '../errors.js';
import type { RespoolConfig } from '../config/types.js';
import type { Metrics } from '../metrics/metrics.js';
import type { LeaseRefusalReason } from '../metrics/metric-definitions.js';
import type { UpstreamIdentity } from '../acl/upstream-identity.js';
import type { IdentityHooks } from './upstream-pools.js';

/** What DedicatedPools reads from the configuration (the server passes its RespoolConfig). */
export type DedicatedPoolsConfig = Pick<RespoolConfig, 'dedicated' | 'upstreamAuth' | 'timeouts' | 'limits'> & Partial<Pick<RespoolConfig, 'upstreamTls'>>;

/**
 * Sends `CLIENT UNBLOCK <clientId>` to the node over some other connection (the server wires it to
 * `UpstreamPools.get(host, port, 2).call(['CLIENT', 'UNBLOCK', id])`). Rejects if that failed.
 */
export type UnblockFn = (host: string, port: number, clientId: number) => Promise<void>;

export interface DedicatedPoolsOptions {
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

/** An acquire() parked at a bound. */
interface Waiter {
  resolve(conn: DedicatedConnection): void;
  reject(err: Error): void;
  /** Its acquireTimeoutMs timer while parked; null while granted (or re-queued, see onGranted). */
  timer: NodeJS.Timeout | null;
  /** The bound it last waited at (named in the error if no bound is in the way when it times out). */
  blockedBy: 'max_per_node' | 'max_total';
}

/** One generic-pool (node address, protocol, database) and the acquires waiting for it. */
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
  readonly pool: Pool<DedicatedConnection>;
  /** acquire() calls parked at a bound, oldest first (timed-out ones are removed). */
  readonly waiters: Waiter[];
  /** pool.acquire() calls made for a granted acquire and not yet resolved. */
  granting: number;
}

interface Lease {
  readonly node: NodeLeases;
  abandoning: boolean;
}

/** What the custom evictor sees of generic-pool's PooledResource. */
interface PooledResourceView {
  obj: DedicatedConnection;
  lastIdleTime: number;
}

/**
 * generic-pool's DefaultEvictor evicts on idle time only; ours also evicts an idle connection
 * that closed (the server dropped it, timeout, kill), so a dead idle connection neither stays
 * counted against the bounds nor gets lent out.
 */
class LeaseEvictor {
  evict(config: { idleTimeoutMillis: number }, resource: PooledResourceView): boolean {
    const conn = resource.obj;
    if (conn.state !== 'ready' || conn.inflightCount > 0) return true;
    return Date.now() - resource.lastIdleTime > config.idleTimeoutMillis;
  }
}

/**
 * generic-pool's Pool with our evictor. createPool() always uses DefaultEvictor; the Pool
 * constructor (Evictor, Deque, PriorityQueue, factory, options) is what createPool itself calls
 * (generic-pool 3.x index.js), but the typings do not declare it.
 */
const PoolWithEvictor = genericPool.Pool as unknown as new (
  evictor: typeof LeaseEvictor,
  deque: unknown,
  priorityQueue: unknown,
  factory: Factory<DedicatedConnection>,
  options: GenericPoolOptions,
) => Pool<DedicatedConnection>;
const { Deque, PriorityQueue } = genericPool as unknown as { Deque: unknown; PriorityQueue: unknown };

const ABANDON_GRACE_MS = 1000;

/**
 * Leased upstream connections (WATCH … EXEC, blocking commands): one generic-pool per node
 * address, protocol, database (a standalone upstream's databases ≠ 0: connections opened
 * with SELECT n) and upstream identity (a user's own, src/acl/upstream-identity.ts), created on
 * demand, behind one admission gate for the whole process.
 *
 *   per pool   : leased (borrowed) + idle (available) + dialing (being created) ≤ maxPerNode
 *                (= generic-pool's max; pool.size counts all three). Pools are per node,
 *                protocol and database: a node leased in several databases may hold maxPerNode
 *                for each; maxTotal bounds them all
 *   per process: total = Σ pool.size ≤ maxTotal — `total` is counted in the factory: +1 when a
 *                dial starts, −1 when generic-pool destroys the connection
 *   admission  : acquire() is granted at once when its pool has an idle connection, or a dial
 *                fits both bounds; a granted acquire is the only kind that reaches
 *                pool.acquire(), so generic-pool never queues for capacity itself.
 *                Otherwise it waits in its pool's `waiters` (FIFO; a later acquire never
 *                overtakes an earlier one for the same pool) up to acquireTimeoutMs, then
 *                rejects with an error naming the bound — never a hang. A waiter blocked only by
 *                maxTotal makes another pool close one of its idle connections for it.
 *   wake-ups   : release, destroy and dial failure pump every pool's waiters (on a microtask).
 *   dials      : factory.create() never rejects (a rejected create makes generic-pool re-dial in
 *                a tight loop while anyone waits); it resolves with the connection, ready or
 *                failed, and the granted acquire that receives a failed one destroys it and
 *                rejects with ProxyError.upstreamUnavailable.
 *   leases     : every borrowed connection is in `leases` until release()/abandon() hands it
 *                back: clean and validated (ready, nothing in flight, still in its pool's
 *                database) → idle for reuse; else destroyed. Idle connections are evicted
 *                after idleMs, and at once (next eviction run) when they close.
 */
export class DedicatedPools {
  private readonly nodes = new Map<string, NodeLeases>();
  private readonly leases = new Map<DedicatedConnection, Lease>();
  /** Every connection any pool holds (dialing, idle, leased), for closeAll(). */
  private readonly connections = new Set<DedicatedConnection>();
  private total = 0;
  /** Idle connections being closed to make room under maxTotal for another pool. */
  private reclaiming = 0;
  private pumpScheduled = false;
  private closed = false;
  private readonly refusals: Record<LeaseRefusalReason, number> = {
    max_per_node: 0,
    max_total: 0,
    upstream_unavailable: 0,
    shutting_down: 0,
  };
  private readonly metrics: Metrics | undefined;
  private readonly abandonGraceMs: number;
  /** Set by the server: the identity mirror (identity connections make sure their user exists first). */
  identityHooks: IdentityHooks | null = null;

  constructor(
    private readonly config: DedicatedPoolsConfig,
    private readonly unblock: UnblockFn,
    options: DedicatedPoolsOptions = {},
  ) {
    this.metrics = options.metrics;
    this.abandonGraceMs = options.abandonGraceMs ?? ABANDON_GRACE_MS;
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
  acquire(host: string, port: number, protocol: 2 | 3, db = 0, identity: UpstreamIdentity | null = null): Promise<DedicatedConnection> {
    if (this.closed) {
      this.refuse('shutting_down');
      return Promise.reject(new Error(ProxyError.shuttingDown()));
    }
    const node = this.node(host, port, protocol, db, identity);
    return new Promise<DedicatedConnection>((resolve, reject) => {
      const waiter: Waiter = { resolve, reject, timer: null, blockedBy: 'max_per_node' };
      if (node.waiters.length === 0) {
        const blocked = this.blockedBy(node);
        if (blocked === null) {
          this.grant(node, waiter);
          return;
        }
        waiter.blockedBy = blocked;
      }
      this.park(node, waiter);
      this.schedulePump(); // a maxTotal waiter may reclaim an idle connection elsewhere
    });
  }

  /**
   * Hands a leased connection back. `clean`: the caller left it in a known state (no WATCH, no
   * MULTI, not subscribed, nothing outstanding); it is kept for reuse if it is also still ready
   * with nothing in flight, in the database of its pool (`conn.db`). Otherwise it is closed.
   * Releasing twice, or after closeAll(), does nothing.
   */
  release(conn: DedicatedConnection, clean: boolean): void {
    const lease = this.leases.get(conn);
    if (lease === undefined || lease.abandoning) return;
    this.leases.delete(conn);
    conn.onPush = null;
    conn.onUnsolicited = null;
    conn.setDeadline(null);
    const pool = lease.node.pool;
    if (clean && !this.closed && conn.state === 'ready' && conn.inflightCount === 0 && conn.db === lease.node.db) {
      pool.release(conn).catch(() => {});
    } else {
      pool.destroy(conn).catch(() => {});
    }
    this.publish(lease.node.address);
    this.schedulePump();
  }

  /**
   * The client went away while a request is outstanding on `conn` (e.g. blocked in BLPOP):
   * CLIENT UNBLOCK it through the `unblock` callback, then release it clean once every
   * outstanding reply has come (the replies still go to their requests, which the caller
   * ignores), or close it if that takes longer than the grace period (1 s) or the unblock fails.
   * With nothing outstanding it is released clean at once.
   */
  abandon(conn: DedicatedConnection): void {
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
    return { total: this.total, byNode, refusals: { ...this.refusals } };
  }

  /** Closes every connection (leased ones too: their requests fail) and refuses every waiter. */
  async closeAll(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const node of this.nodes.values()) {
      for (const waiter of node.waiters.splice(0)) {
        this.settle(waiter);
        this.refuse('shutting_down');
        waiter.reject(new Error(ProxyError.shuttingDown()));
      }
    }
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

  // ---- admission ------------------------------------------------------------------------------

  private node(host: string, port: number, protocol: 2 | 3, db: number, identity: UpstreamIdentity | null): NodeLeases {
    let key = db === 0 ? `${host}:${port}/${protocol}` : `${host}:${port}/${protocol}/${db}`;
    if (identity !== null) key += `#${identity.key}`;
    let node = this.nodes.get(key);
    if (node === undefined) {
      const address = `${host}:${port}`;
      const factory: Factory<DedicatedConnection> = {
        create: () => this.dial(host, port, protocol, db, identity),
        destroy: async (conn) => this.onDestroyed(conn, address),
      };
      const { maxPerNode, idleMs } = this.config.dedicated;
      const pool = new PoolWithEvictor(LeaseEvictor, Deque, PriorityQueue, factory, {
        max: maxPerNode,
        min: 0,
        idleTimeoutMillis: idleMs,
        evictionRunIntervalMillis: Math.max(50, Math.min(1000, Math.floor(idleMs / 2))),
        numTestsPerEvictionRun: maxPerNode,
        fifo: false, // reuse the most recently released connection; older ones age out
      });
      node = { key, host, port, address, protocol, db, identity, pool, waiters: [], granting: 0 };
      this.nodes.set(key, node);
    }
    return node;
  }

  /** Which bound stops a new lease on this pool now; null = grant it. */
  private blockedBy(node: NodeLeases): 'max_per_node' | 'max_total' | null {
    if (node.pool.available > 0) return null; // an idle connection: no new one needed
    if (node.pool.size >= this.config.dedicated.maxPerNode) return 'max_per_node';
    if (this.total >= this.config.dedicated.maxTotal) return 'max_total';
    return null;
  }

  private park(node: NodeLeases, waiter: Waiter): void {
    this.startWaiting(node, waiter);
    node.waiters.push(waiter);
    this.publish(node.address);
  }

  /** Starts the waiter's acquireTimeoutMs; at the end it is refused, naming the bound. */
  private startWaiting(node: NodeLeases, waiter: Waiter): void {
    const ms = this.config.dedicated.acquireTimeoutMs;
    waiter.timer = setTimeout(() => {
      const i = node.waiters.indexOf(waiter);
      if (i >= 0) node.waiters.splice(i, 1);
      this.settle(waiter);
      // The bound in the way now (a waiter behind others waits at the head's bound).
      const reason = this.blockedBy(node) ?? waiter.blockedBy;
      const { maxPerNode, maxTotal } = this.config.dedicated;
      this.refuse(reason);
      waiter.reject(
        new Error(
          reason === 'max_per_node'
            ? ProxyError.leaseLimitReached(node.address, ms, 'dedicated.maxPerNode', maxPerNode)
            : ProxyError.leaseLimitReached(node.address, ms, 'dedicated.maxTotal', maxTotal),
        ),
      );
      this.publish(node.address);
      this.schedulePump();
    }, ms);
  }

  private settle(waiter: Waiter): void {
    if (waiter.timer !== null) clearTimeout(waiter.timer);
    waiter.timer = null;
  }

  /** Takes an idle connection or starts a dial for `waiter` (the caller checked blockedBy). */
  private grant(node: NodeLeases, waiter: Waiter): void {
    this.settle(waiter);
    node.granting++;
    node.pool.acquire().then(
      (conn) => {
        node.granting--;
        this.onGranted(node, conn, waiter);
      },
      (err: Error) => {
        // Only when the pool is draining (closeAll).
        node.granting--;
        this.refuse('shutting_down');
        waiter.reject(new Error(this.closed ? ProxyError.shuttingDown() : ProxyError.upstreamUnavailable(node.address, err.message)));
      },
    );
  }

  private onGranted(node: NodeLeases, conn: DedicatedConnection, waiter: Waiter): void {
    if (this.closed) {
      node.pool.destroy(conn).catch(() => {});
      this.refuse('shutting_down');
      waiter.reject(new Error(ProxyError.shuttingDown()));
      return;
    }
    if (conn.state === 'ready' && conn.inflightCount === 0) {
      this.leases.set(conn, { node, abandoning: false });
      this.publish(node.address);
      waiter.resolve(conn);
      return;
    }
    node.pool.destroy(conn).catch(() => {});
    if (!conn.wasReady) {
      // The dial failed (refused, connect timeout, handshake error).
      this.refuse('upstream_unavailable');
      waiter.reject(new Error(ProxyError.upstreamUnavailable(node.address, conn.closeReason)));
      return;
    }
    // An idle connection that died before the evictor saw it: try again, first in line.
    node.waiters.unshift(waiter);
    this.schedulePump();
  }

  private schedulePump(): void {
    if (this.pumpScheduled || this.closed) return;
    this.pumpScheduled = true;
    // setImmediate, not a microtask: generic-pool files a new or returned connection as idle a
    // few promise ticks after our factory/release call returns; the pump must see it.
    setImmediate(() => {
      this.pumpScheduled = false;
      this.pump();
    });
  }

  /** Grants what the bounds allow now, oldest waiter first per pool. */
  private pump(): void {
    if (this.closed) return;
    let blockedByTotal = 0;
    for (const node of this.nodes.values()) {
      while (node.waiters.length > 0) {
        const head = node.waiters[0]!;
        const blocked = this.blockedBy(node);
        if (blocked !== null) {
          head.blockedBy = blocked;
          // A re-queued waiter (see onGranted) that now has to wait: give it its full wait.
          if (head.timer === null) this.startWaiting(node, head);
          if (blocked === 'max_total') blockedByTotal++;
          break;
        }
        node.waiters.shift();
        this.grant(node, head);
      }
      this.publish(node.address);
    }
    // Idle connections of one pool must not keep another pool's waiters out under maxTotal.
    while (this.reclaiming < blockedByTotal && this.reclaimIdle()) this.reclaiming++;
  }

  /** Closes one idle connection of a pool nobody waits on; false if there is none. */
  private reclaimIdle(): boolean {
    for (const node of this.nodes.values()) {
      if (node.waiters.length > 0 || node.pool.available === 0 || node.pool.pending > 0) continue;
      // With an idle connection and nobody waiting, pool.acquire() lends it out synchronously.
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

  /** generic-pool's create: never rejects (see the class comment). */
  private async dial(host: string, port: number, protocol: 2 | 3, db: number, identity: UpstreamIdentity | null): Promise<DedicatedConnection> {
    this.total++;
    const hooks = this.identityHooks;
    const address = `${host}:${port}`;
    const conn = new DedicatedConnection({
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
    // If a returned connection served the acquire this dial was for, this one goes idle: a waiter may take it.
    this.schedulePump();
    return conn;
  }

  /** generic-pool's destroy: closes the socket and gives the connection's place back. */
  private onDestroyed(conn: DedicatedConnection, address: string): void {
    conn.close('lease closed by respool');
    if (this.connections.delete(conn)) this.total--;
    this.leases.delete(conn);
    this.publish(address);
    this.schedulePump();
  }

  // ---- counters -------------------------------------------------------------------------------

  private addNodeStats(node: NodeLeases, s: LeaseNodeStats): void {
    const pool = node.pool;
    const creating = Math.max(0, pool.size - pool.borrowed - pool.available);
    s.inUse += pool.borrowed;
    s.idle += pool.available;
    s.creating += creating;
    s.waiting += node.waiters.length;
  }

  private refuse(reason: LeaseRefusalReason): void {
    this.refusals[reason]++;
    this.metrics?.leaseRefusalCounter(reason).inc();
  }

  /** Sets the node's leased_connections gauges (both protocols summed). */
  private publish(address: string): void {
    const metrics = this.metrics;
    if (metrics === undefined) return;
    const s: LeaseNodeStats = { inUse: 0, idle: 0, creating: 0, waiting: 0 };
    for (const node of this.nodes.values()) if (node.address === address) this.addNodeStats(node, s);
    metrics.leasedConnectionsGauge(address, 'in_use').set(s.inUse);
    metrics.leasedConnectionsGauge(address, 'idle').set(s.idle);
    metrics.leasedConnectionsGauge(address, 'waiting').set(s.waiting);
  }
}
