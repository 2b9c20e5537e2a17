import genericPool, { type Factory, type Options as GenericPoolOptions, type Pool } from 'generic-pool';
import type { LeasedConnection } from './leased-connection.js';

// generic-pool as the leased connections use it (lease-pools.ts): one pool per node, protocol,
// database and identity, with an evictor of our own and options a reload can change.

/** What the custom evictor sees of generic-pool's PooledResource. */
interface PooledResourceView {
  obj: LeasedConnection;
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
  factory: Factory<LeasedConnection>,
  options: GenericPoolOptions,
) => Pool<LeasedConnection>;
const { Deque, PriorityQueue } = genericPool as unknown as { Deque: unknown; PriorityQueue: unknown };

/** generic-pool's options as it reads them at use (a reload may change dedicated.*). */
interface LivePoolOptions {
  max: number;
  acquireTimeoutMillis: number;
  idleTimeoutMillis: number;
}

/** dedicated.* as a pool reads them. */
export interface LeasePoolBounds {
  maxPerNode: number;
  acquireTimeoutMs: number;
  idleMs: number;
}

/** A pool of leased connections made by `factory`, within `bounds`. */
export function leasePool(factory: Factory<LeasedConnection>, bounds: LeasePoolBounds): Pool<LeasedConnection> {
  const { maxPerNode, acquireTimeoutMs, idleMs } = bounds;
  return new PoolWithEvictor(LeaseEvictor, Deque, PriorityQueue, factory, {
    max: maxPerNode,
    min: 0,
    acquireTimeoutMillis: acquireTimeoutMs,
    testOnBorrow: true,
    idleTimeoutMillis: idleMs,
    evictionRunIntervalMillis: Math.max(50, Math.min(1000, Math.floor(idleMs / 2))),
    numTestsPerEvictionRun: maxPerNode,
    fifo: false, // reuse the most recently released connection; older ones age out
  });
}

/** New bounds for an existing pool: generic-pool reads these options at use. */
export function reconfigureLeasePool(pool: Pool<LeasedConnection>, bounds: LeasePoolBounds): void {
  const live = (pool as unknown as { _config: LivePoolOptions })._config;
  live.max = bounds.maxPerNode;
  live.acquireTimeoutMillis = bounds.acquireTimeoutMs;
  live.idleTimeoutMillis = bounds.idleMs;
}
