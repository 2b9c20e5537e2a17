import type { Metrics } from './metrics/metrics.js';
import type { UpstreamPools } from './upstream/upstream-pools.js';
import type { LeasePools } from './upstream/lease-pools.js';
import type { MemoryCeiling } from './client/memory-ceiling.js';
import type { FleetState } from './fleet/fleet-state.js';
import type { LaneClass } from './client/lane-class.js';

/** What the sampler reads of the running proxy. */
export interface SampledProxy {
  metrics: Metrics;
  /** Sockets the accept gate holds (session/accept-gate.ts). */
  parkedClients(): number;
  pools: UpstreamPools;
  dedicated: LeasePools;
  sessions(): Iterable<{ readonly pending: number; queryBytes(): number; readonly laneClass: LaneClass }>;
  memory: MemoryCeiling;
  fleetState: FleetState | null;
}

/**
 * Queue depths and what respool holds, sampled once a second into their gauges (cheaper than
 * updating gauges on the hot path): accepts parked, requests waiting for a link and in flight,
 * replies owed to clients, the admission backlog per lane, requests in flight per link lane,
 * buffered bytes, links per upstream identity (users seen before and gone show 0), the fleet
 * state's age. The timer does not keep the process alive.
 */
export function startSampler(p: SampledProxy): NodeJS.Timeout {
  const { metrics, pools, memory, dedicated, fleetState } = p;
  const depth = {
    accept: metrics.raw.queue_depth.labels('accept'),
    nodeWait: metrics.raw.queue_depth.labels('node_wait'),
    inflight: metrics.raw.queue_depth.labels('upstream_inflight'),
    pending: metrics.raw.queue_depth.labels('client_pending'),
  };
  const identityUsersSeen = new Set<string>();
  const sampler = setInterval(() => {
    depth.accept.set(p.parkedClients());
    depth.nodeWait.set(pools.waitingRequests());
    depth.inflight.set(pools.load.requests);
    metrics.raw.upstream_inflight_bytes.set(pools.load.bytes);
    let pending = 0;
    const backlog = { interactive: { clients: 0, bytes: 0 }, bulk: { clients: 0, bytes: 0 } };
    for (const session of p.sessions()) {
      pending += session.pending;
      const queued = session.queryBytes();
      if (queued === 0) continue;
      const b = backlog[session.laneClass];
      b.clients++;
      b.bytes += queued;
    }
    depth.pending.set(pending);
    for (const lane of ['interactive', 'bulk'] as const) {
      metrics.raw.admission_backlog_clients.labels(lane).set(backlog[lane].clients);
      metrics.raw.admission_backlog_bytes.labels(lane).set(backlog[lane].bytes);
    }
    metrics.raw.upstream_link_inflight_requests.reset();
    for (const [node, lanes] of pools.inflightByLane()) {
      metrics.raw.upstream_link_inflight_requests.labels(node, 'interactive').set(lanes.interactive);
      metrics.raw.upstream_link_inflight_requests.labels(node, 'bulk').set(lanes.bulk);
    }
    const buffered = memory.buffered; // its last scan (every 250 ms)
    for (const lane of ['interactive', 'bulk'] as const) {
      metrics.raw.client_buffered_bytes.labels(lane, 'output').set(buffered.output[lane]);
      metrics.raw.client_buffered_bytes.labels(lane, 'requests').set(buffered.requests[lane]);
    }
    metrics.raw.memory_buffered_bytes.set(buffered.total);
    const byUser = pools.identityLinks();
    for (const [user, n] of dedicated.identityLeases()) byUser.set(user, (byUser.get(user) ?? 0) + n);
    for (const user of identityUsersSeen) if (!byUser.has(user)) byUser.set(user, 0);
    for (const [user, n] of byUser) {
      identityUsersSeen.add(user);
      metrics.raw.upstream_identity_links.labels(user).set(n);
    }
    if (fleetState !== null) metrics.raw.fleet_state_confirmed_age_seconds.set(Math.min(1e6, fleetState.confirmedAgeMs() / 1000));
  }, 1000);
  sampler.unref();
  return sampler;
}
