import { NodePool, type NodePoolLimits } from './node-pool.js';
import { UNBOUNDED_NESTING } from '../resp/limits.js';
import { NodeHealth } from './node-health.js';
import { ProcessLoad } from './process-load.js';
import type { RespoolConfig } from '../config/types.js';
import type { Metrics } from '../metrics/metrics.js';
import type { RateLimitedLog } from '../util/rate-limited-log.js';
import type { UpstreamIdentity } from '../acl/upstream-identity.js';

export type NodeRole = 'primary' | 'replica';

/** A node of a topology snapshot (cluster/topology.ts ClusterNode): its pools are cached on the object, which snapshots never change. */
export interface PoolNode {
  readonly host: string;
  readonly port: number;
}

/** What identity connections need before and after their handshake (upstream/identity-mirror.ts). */
export interface IdentityHooks {
  /** Before an identity connection's handshake: its user exists on the node (mirror mode). */
  prepare(identity: UpstreamIdentity, address: string): Promise<void>;
  /** The node refused the identity's password (a mirrored user lost with a restart, a mapped one misconfigured). */
  refused(identity: UpstreamIdentity, address: string): void;
}

/**
 * Every NodePool, keyed by (node, protocol, role, database). A client's commands travel on links
 * of the client's own protocol (RESP2 or RESP3 after HELLO 3), so no reply is ever translated.
 * Replica pools send READONLY in their handshake and are kept apart from primary pools. A
 * standalone upstream's databases other than 0 (a client's SELECT n, handlers/local.ts) get pools
 * of their own, created on first use, whose links send SELECT n in their handshake: each pool
 * holds at most connectionsPerNode links, so a node has that many per database in use.
 *
 * A user with an upstream identity (src/acl/upstream-identity.ts) has pools of its own, keyed by
 * the identity too, whose links authenticate as it: opened on first use, at most
 * connectionsPerNode each, shared by every client of that user, closed after dedicated.idleMs
 * without a request. Their circuits are their own, so an identity the node refuses fails only
 * that user's commands.
 */
export class UpstreamPools {
  private readonly pools = new Map<string, NodePool>();
  /** Hot-path cache: node object → its db-0 pools by [protocol 2|3][role], no string building. */
  private readonly byNode = new WeakMap<PoolNode, Array<NodePool | undefined>>();
  /** The same for databases ≠ 0 (standalone upstreams only): node → db → pools as in byNode. */
  private readonly byNodeDb = new WeakMap<PoolNode, Map<number, Array<NodePool | undefined>>>();
  /** Pools of upstream identities: node → identity → db → pools as in byNode (no string built per request). */
  private readonly byNodeIdentity = new WeakMap<PoolNode, Map<UpstreamIdentity, Array<Array<NodePool | undefined>>>>();
  /** Identity pools, with the request count seen at the last idle sweep. */
  private readonly identityPools = new Map<NodePool, { identity: UpstreamIdentity; sentAtSweep: number }>();
  private identitySweep: NodeJS.Timeout | null = null;
  /** Set by the server: the identity mirror. */
  identityHooks: IdentityHooks | null = null;
  /** One per node address, shared by all its pools: circuit, dial budget, retry budget. */
  private readonly healthByAddress = new Map<string, NodeHealth>();
  /** Requests and bytes in flight on every link of the process (resilience.maxInflightPerProcess). */
  readonly load: ProcessLoad;
  private readonly limits: NodePoolLimits;

  constructor(
    private readonly config: RespoolConfig,
    private readonly metrics?: Metrics,
    /** Operator event lines (node lost/back, circuit open/closed, load shed), rate limited. */
    private readonly events?: RateLimitedLog,
  ) {
    const r = config.resilience;
    this.load = new ProcessLoad(r.maxInflightPerProcess, r.maxInflightBytesPerProcess);
    this.limits = {
      queueWindowMs: r.queueWindowMs,
      maxQueued: r.maxQueuedPerNode,
      maxQueuedBytes: r.maxQueuedBytesPerNode,
      maxInflightPerLink: r.maxInflightPerLink,
      maxInflightBytesPerLink: r.maxInflightBytesPerLink,
    };
  }

  /** True when every upstream connection uses TLS (config.upstreamTls): discovery takes the nodes' TLS ports. */
  get usesTls(): boolean {
    return this.config.upstreamTls?.enabled === true;
  }

  /**
   * A reload changed config.timeouts or the resilience bounds (in place): the shared bounds
   * object every pool reads, the process-wide load bounds, and every pool's timeouts follow.
   */
  reconfigure(): void {
    const r = this.config.resilience;
    Object.assign(this.limits, {
      queueWindowMs: r.queueWindowMs,
      maxQueued: r.maxQueuedPerNode,
      maxQueuedBytes: r.maxQueuedBytesPerNode,
      maxInflightPerLink: r.maxInflightPerLink,
      maxInflightBytesPerLink: r.maxInflightBytesPerLink,
    });
    this.load.maxRequests = r.maxInflightPerProcess;
    this.load.maxBytes = r.maxInflightBytesPerProcess;
    for (const pool of this.pools.values()) pool.setTimeouts(this.config.timeouts.connectMs, this.config.timeouts.commandMs, this.config.timeouts.adminCommandMs);
  }

  /** The shared health record of a node address ("host:port"). */
  health(address: string): NodeHealth {
    let health = this.healthByAddress.get(address);
    if (health === undefined) {
      health = new NodeHealth(address, this.config.resilience, this.metrics, this.events);
      this.healthByAddress.set(address, health);
    }
    return health;
  }

  /** Requests waiting for a link, over every pool. */
  waitingRequests(): number {
    let n = 0;
    for (const pool of this.pools.values()) n += pool.waitingCount;
    return n;
  }

  /** What every pool's links hold in memory (NodePool.bufferedBytes): limits.maxMemory counts it. */
  bufferedBytes(): number {
    let n = 0;
    for (const pool of this.pools.values()) n += pool.bufferedBytes();
    return n;
  }

  /** Requests in flight per node address and lane, over every pool of the node. */
  inflightByLane(): Map<string, { interactive: number; bulk: number }> {
    const out = new Map<string, { interactive: number; bulk: number }>();
    for (const pool of this.pools.values()) {
      const lanes = pool.inflightByLane();
      const sum = out.get(pool.address) ?? { interactive: 0, bulk: 0 };
      sum.interactive += lanes.interactive;
      sum.bulk += lanes.bulk;
      out.set(pool.address, sum);
    }
    return out;
  }

  /** The pool of (node, protocol, role, database, identity), created on first use. */
  get(host: string, port: number, protocol: 2 | 3, role: NodeRole = 'primary', db = 0, identity: UpstreamIdentity | null = null): NodePool {
    let key = db === 0 ? `${host}:${port}/${protocol}/${role}` : `${host}:${port}/${protocol}/${role}/${db}`;
    if (identity !== null) key += `#${identity.key}`;
    let pool = this.pools.get(key);
    if (pool === undefined || pool.isClosed) {
      const address = `${host}:${port}`;
      const hooks = this.identityHooks;
      pool = new NodePool(host, port, {
        size: this.config.connectionsPerNode,
        bulkSize: this.config.admission.bulkConnectionsPerNode,
        protocol,
        // A replica link needs READONLY to serve reads; an identity that may not run it only gets
        // whole-node commands there (fan-out: SCRIPT LOAD …), its reads go to primaries (router.ts).
        readonly: role === 'replica' && (identity === null || identity.replicaReads),
        db,
        role,
        auth: identity === null ? this.config.upstreamAuth : { username: identity.username, password: identity.password },
        tls: this.config.upstreamTls,
        ...(identity !== null ? { identity: true } : {}),
        ...(identity !== null && hooks !== null
          ? { prepare: () => hooks.prepare(identity, address), onAuthRefused: () => hooks.refused(identity, address) }
          : {}),
        clientName: 'respool',
        connectTimeoutMs: this.config.timeouts.connectMs,
        commandTimeoutMs: this.config.timeouts.commandMs,
        adminCommandMs: this.config.timeouts.adminCommandMs,
        framerLimits: {
          maxBulkLength: this.config.limits.maxBulkLength,
          maxArrayLength: this.config.limits.maxArrayLength,
          maxNestingDepth: UNBOUNDED_NESTING, // resp/limits.ts: replies of any depth
        },
        metrics: this.metrics,
        health: identity === null ? this.health(address) : this.identityHealth(address, identity),
        limits: this.limits,
        load: this.load,
      });
      this.pools.set(key, pool);
      if (identity !== null) this.trackIdentityPool(pool, identity);
    }
    return pool;
  }

  /** An identity's own circuit and budgets toward a node (no per-identity metric series). */
  private identityHealth(address: string, identity: UpstreamIdentity): NodeHealth {
    const key = `${address}#${identity.key}`;
    let health = this.healthByAddress.get(key);
    if (health === undefined) {
      health = new NodeHealth(address, this.config.resilience, undefined, this.events);
      this.healthByAddress.set(key, health);
    }
    return health;
  }

  private trackIdentityPool(pool: NodePool, identity: UpstreamIdentity): void {
    this.identityPools.set(pool, { identity, sentAtSweep: pool.sent });
    if (this.identitySweep !== null) return;
    const every = Math.max(250, Math.min(10_000, Math.floor(this.config.dedicated.idleMs / 2)));
    this.identitySweep = setInterval(() => this.sweepIdentityPools(), every);
    this.identitySweep.unref();
  }

  /** Closes identity pools that had no request since the last sweep and hold nothing in flight. */
  private sweepIdentityPools(): void {
    for (const [pool, seen] of this.identityPools) {
      if (pool.isClosed) {
        this.identityPools.delete(pool);
        continue;
      }
      if (pool.sent === seen.sentAtSweep && pool.isQuiet()) {
        pool.close();
        this.identityPools.delete(pool);
      } else {
        seen.sentAtSweep = pool.sent;
      }
    }
    if (this.identityPools.size === 0 && this.identitySweep !== null) {
      clearInterval(this.identitySweep);
      this.identitySweep = null;
    }
  }

  /** Open shared links per respool user with an upstream identity (respool_upstream_identity_links). */
  identityLinks(): Map<string, number> {
    const out = new Map<string, number>();
    for (const [pool, { identity }] of this.identityPools) out.set(identity.user, (out.get(identity.user) ?? 0) + pool.openLinks);
    return out;
  }

  /**
   * The pool for a topology node (cached per node object; snapshots are immutable). Database 0
   * (every cluster, and most standalone clients) is one array lookup; other databases go through
   * forNodeDb.
   */
  forNode(node: PoolNode, protocol: 2 | 3, role: NodeRole, db = 0, identity: UpstreamIdentity | null = null): NodePool {
    if (identity !== null) return this.forNodeIdentity(node, protocol, role, db, identity);
    if (db !== 0) return this.forNodeDb(node, protocol, role, db);
    let cached = this.byNode.get(node);
    if (cached === undefined) {
      cached = [];
      this.byNode.set(node, cached);
    }
    return this.cachedPool(cached, node, protocol, role, 0, null);
  }

  /** forNode for a database ≠ 0: a second map level (node → db → pools). */
  private forNodeDb(node: PoolNode, protocol: 2 | 3, role: NodeRole, db: number): NodePool {
    let byDb = this.byNodeDb.get(node);
    if (byDb === undefined) {
      byDb = new Map();
      this.byNodeDb.set(node, byDb);
    }
    let cached = byDb.get(db);
    if (cached === undefined) {
      cached = [];
      byDb.set(db, cached);
    }
    return this.cachedPool(cached, node, protocol, role, db, null);
  }

  /** forNode for an upstream identity: node → identity → db → pools. */
  private forNodeIdentity(node: PoolNode, protocol: 2 | 3, role: NodeRole, db: number, identity: UpstreamIdentity): NodePool {
    let byIdentity = this.byNodeIdentity.get(node);
    if (byIdentity === undefined) {
      byIdentity = new Map();
      this.byNodeIdentity.set(node, byIdentity);
    }
    let byDb = byIdentity.get(identity);
    if (byDb === undefined) {
      byDb = [];
      byIdentity.set(identity, byDb);
    }
    return this.cachedPool((byDb[db] ??= []), node, protocol, role, db, identity);
  }

  /** A cache array holds one pool per (protocol, role); a closed one is replaced. */
  private cachedPool(cached: Array<NodePool | undefined>, node: PoolNode, protocol: 2 | 3, role: NodeRole, db: number, identity: UpstreamIdentity | null): NodePool {
    const index = (protocol - 2) * 2 + (role === 'primary' ? 0 : 1);
    let pool = cached[index];
    if (pool === undefined || pool.isClosed) {
      pool = this.get(node.host, node.port, protocol, role, db, identity);
      cached[index] = pool;
    }
    return pool;
  }

  /** Open links to `address` serving database `db` (summed over protocols and roles; for tests). */
  openLinksForDb(address: string, db: number): number {
    let n = 0;
    for (const pool of this.pools.values()) if (pool.address === address && pool.db === db) n += pool.openLinks;
    return n;
  }

  /** Closes the pools of nodes that are no longer part of the topology. */
  retainOnly(addresses: ReadonlySet<string>): void {
    for (const [key, pool] of this.pools) {
      if (!addresses.has(pool.address)) {
        pool.close();
        this.pools.delete(key);
        this.identityPools.delete(pool);
        this.healthByAddress.delete(pool.address);
      }
    }
    for (const key of this.healthByAddress.keys()) {
      const at = key.indexOf('#');
      if (at > 0 && !addresses.has(key.slice(0, at))) this.healthByAddress.delete(key);
    }
  }

  /** A pool of `address` (database 0) with an open link, for a control-plane call that must not dial; undefined when none. */
  openPoolOf(address: string): NodePool | undefined {
    for (const pool of this.pools.values()) if (pool.address === address && pool.db === 0 && pool.openLinks > 0) return pool;
    return undefined;
  }

  /** Open links per node address, summed over protocols, roles and databases (for tests and /topology). */
  openLinksByNode(): Record<string, number> {
    const out: Record<string, number> = {};
    for (const pool of this.pools.values()) out[pool.address] = (out[pool.address] ?? 0) + pool.openLinks;
    return out;
  }

  /** Every pool to `address` (every protocol, role and database): NodePool.barrier on each. */
  async barrier(address: string): Promise<void> {
    const pools = [...this.pools.values()].filter((p) => p.address === address);
    await Promise.all(pools.map((p) => p.barrier()));
  }

  closeAll(): void {
    for (const pool of this.pools.values()) pool.close();
    this.pools.clear();
    this.identityPools.clear();
    if (this.identitySweep !== null) clearInterval(this.identitySweep);
    this.identitySweep = null;
  }

  /** Closes every pool of `identity` (its user was deleted, or its password or name changed). */
  closeIdentity(identity: UpstreamIdentity): void {
    for (const [key, pool] of this.pools) {
      if (!key.endsWith(`#${identity.key}`)) continue;
      pool.close();
      this.pools.delete(key);
      this.identityPools.delete(pool);
    }
  }
}
