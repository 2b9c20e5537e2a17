import { NodePool, type NodePoolLimits } from './node-pool.js';
import { UNBOUNDED_NESTING } from '../resp/limits.js';
import { NodeHealth } from './node-health.js';
import { ProcessLoad } from './process-load.js';
import type { RespoolConfig } from '../config/types.js';
import type { Metrics } from '../admin/metrics.js';
import type { RateLimitedLog } from '../util/rate-limited-log.js';
import type { ClusterNode } from '../cluster/topology.js';

export type NodeRole = 'primary' | 'replica';

/**
 * Every NodePool, keyed by (node, protocol, role, database). A client's commands travel on links
 * of the client's own protocol (RESP2 or RESP3 after HELLO 3), so no reply is ever translated.
 * Replica pools send READONLY in their handshake and are kept apart from primary pools. A
 * standalone upstream's databases other than 0 (a client's SELECT n, handlers/local.ts) get pools
 * of their own, created on first use, whose links send SELECT n in their handshake: each pool
 * holds at most connectionsPerNode links, so a node has that many per database in use.
 */
export class UpstreamPools {
  private readonly pools = new Map<string, NodePool>();
  /** Hot-path cache: node object → its db-0 pools by [protocol 2|3][role], no string building. */
  private readonly byNode = new WeakMap<ClusterNode, Array<NodePool | undefined>>();
  /** The same for databases ≠ 0 (standalone upstreams only): node → db → pools as in byNode. */
  private readonly byNodeDb = new WeakMap<ClusterNode, Map<number, Array<NodePool | undefined>>>();
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
    for (const pool of this.pools.values()) pool.setTimeouts(this.config.timeouts.connectMs, this.config.timeouts.commandMs);
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

  /** The pool of (node, protocol, role, database), created on first use. */
  get(host: string, port: number, protocol: 2 | 3, role: NodeRole = 'primary', db = 0): NodePool {
    const key = db === 0 ? `${host}:${port}/${protocol}/${role}` : `${host}:${port}/${protocol}/${role}/${db}`;
    let pool = this.pools.get(key);
    if (pool === undefined) {
      pool = new NodePool(host, port, {
        size: this.config.connectionsPerNode,
        protocol,
        readonly: role === 'replica',
        db,
        role,
        auth: this.config.upstreamAuth,
        tls: this.config.upstreamTls,
        clientName: 'respool',
        connectTimeoutMs: this.config.timeouts.connectMs,
        commandTimeoutMs: this.config.timeouts.commandMs,
        framerLimits: {
          maxBulkLength: this.config.limits.maxBulkLength,
          maxArrayLength: this.config.limits.maxArrayLength,
          maxNestingDepth: UNBOUNDED_NESTING, // resp/limits.ts: replies of any depth
        },
        metrics: this.metrics,
        health: this.health(`${host}:${port}`),
        limits: this.limits,
        load: this.load,
      });
      this.pools.set(key, pool);
    }
    return pool;
  }

  /**
   * The pool for a topology node (cached per node object; snapshots are immutable). Database 0
   * (every cluster, and most standalone clients) is one array lookup; other databases go through
   * forNodeDb.
   */
  forNode(node: ClusterNode, protocol: 2 | 3, role: NodeRole, db = 0): NodePool {
    if (db !== 0) return this.forNodeDb(node, protocol, role, db);
    let cached = this.byNode.get(node);
    if (cached === undefined) {
      cached = [];
      this.byNode.set(node, cached);
    }
    const index = (protocol - 2) * 2 + (role === 'primary' ? 0 : 1);
    let pool = cached[index];
    if (pool === undefined || pool.isClosed) {
      pool = this.get(node.host, node.port, protocol, role);
      cached[index] = pool;
    }
    return pool;
  }

  /** forNode for a database ≠ 0: a second map level (node → db → pools). */
  private forNodeDb(node: ClusterNode, protocol: 2 | 3, role: NodeRole, db: number): NodePool {
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
    const index = (protocol - 2) * 2 + (role === 'primary' ? 0 : 1);
    let pool = cached[index];
    if (pool === undefined || pool.isClosed) {
      pool = this.get(node.host, node.port, protocol, role, db);
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
        this.healthByAddress.delete(pool.address);
      }
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

  closeAll(): void {
    for (const pool of this.pools.values()) pool.close();
    this.pools.clear();
  }
}
