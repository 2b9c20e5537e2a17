import type { AdminRoute } from './admin-server.js';
import { jsonResponse } from './admin-server.js';
import type { Metrics } from '../metrics/metrics.js';
import type { RequestObserver } from '../observe/request-observer.js';
import type { NodeSaturation } from '../observe/node-saturation.js';
import type { RateLimitedLog } from '../util/rate-limited-log.js';
import { displayKey } from '../hotkeys/detector.js';
import type { BigKeys } from '../observe/big-keys.js';
import type { Topology } from '../cluster/topology.js';
import type { TenantSnapshot } from '../tenants/tenant.js';

/**
 * Read-only JSON for operators and the status page (admin/status-page.ts), next to /topology and
 * /hotkeys:
 *
 *   GET /nodes        every node shard by shard: role, zone, health, slots, links, leases, parked clients, circuit
 *   GET /latency      p50/p99/p99.9 and requests/s over the last minute per node (with its
 *                     saturation) and per command family (RESPOOL LATENCY's rows)
 *   GET /saturation   each node's flag and reasons, and the saturated share
 *   GET /slowlog      respool's slow log (?count=n, default 10; -1 all), with node and time split
 *   GET /events       the last operator event lines (node lost/back, circuits, topology, shedding)
 *   GET /bigkeys      the largest keys by reply size in the hot-key sampler's sample
 *   GET /tenants      each tenant's namespace, limits and figures (RESPOOL TENANTS's)
 */
/** What /nodes needs of the running proxy. */
export interface NodeFacts {
  topology(): Topology | null;
  /** Open shared links per node address. */
  links(): Record<string, number>;
  leases(): Record<string, { inUse: number; idle: number; waiting: number }>;
  /** Clients parked at respool on the node's keys, and whether its watch connection is open (parking/parked-pops.ts). */
  parked(): Record<string, { clients: number; watch: boolean }>;
  circuit(address: string): string;
}

/** Every node, shard by shard (primary first): role, zone, health, slots, links, leases, circuit. */
function nodeRows(facts: NodeFacts): unknown {
  const topology = facts.topology();
  const links = facts.links();
  const leases = facts.leases();
  const parked = facts.parked();
  const rows = (topology?.shards ?? []).flatMap((shard, i) => {
    const slots = shard.slots.reduce((n, [a, b]) => n + b - a + 1, 0);
    return [shard.primary, ...shard.replicas].map((n) => ({
      address: n.address, shard: i, role: n.role, zone: n.zone, health: n.health, slots,
      links: links[n.address] ?? 0,
      leases: { inUse: leases[n.address]?.inUse ?? 0, idle: leases[n.address]?.idle ?? 0, waiting: leases[n.address]?.waiting ?? 0 },
      parked: { clients: parked[n.address]?.clients ?? 0, watch: parked[n.address]?.watch ?? false },
      circuit: facts.circuit(n.address),
    }));
  });
  return { mode: topology?.mode ?? null, nodes: rows };
}

export function observeRoutes(deps: { metrics: Metrics; observer: RequestObserver; saturation: NodeSaturation; events: RateLimitedLog; bigKeys: BigKeys | null; nodes: NodeFacts; tenants: () => TenantSnapshot[] }): AdminRoute[] {
  return [
    { method: 'GET', path: '/nodes', handler: () => jsonResponse(200, nodeRows(deps.nodes)) },
    {
      method: 'GET',
      path: '/latency',
      handler: () => {
        const windows = deps.metrics.windows;
        const saturated = new Map(deps.saturation.states().map((s) => [s.node, s]));
        return jsonResponse(200, {
          windowSeconds: windows.spanSeconds(),
          nodes: windows.nodeSummaries().map((s) => ({ ...s, saturated: saturated.get(s.name)?.saturated ?? false })),
          families: windows.familySummaries(),
        });
      },
    },
    {
      method: 'GET',
      path: '/saturation',
      handler: () => jsonResponse(200, { ratio: deps.saturation.ratio(), nodes: deps.saturation.states() }),
    },
    {
      method: 'GET',
      path: '/slowlog',
      handler: (req) => {
        const asked = Number(req.url.searchParams.get('count') ?? '10');
        if (!Number.isInteger(asked) || asked < -1) return jsonResponse(400, { error: 'count must be an integer, -1 for all' });
        const log = deps.observer.logs.slow;
        return jsonResponse(200, {
          length: log.length,
          entries: log.newest(asked).map((e) => ({
            id: e.id, time: e.time, durationUs: e.value, node: e.node, nodeUs: e.nodeUs, respoolUs: Math.max(0, e.value - e.nodeUs),
            command: e.args.map((a) => displayKey(a.toString('latin1'))), client: e.client, clientName: e.clientName,
          })),
        });
      },
    },
    { method: 'GET', path: '/events', handler: () => jsonResponse(200, { events: deps.events.recent() }) },
    { method: 'GET', path: '/tenants', handler: () => jsonResponse(200, { tenants: deps.tenants() }) },
    {
      method: 'GET',
      path: '/bigkeys',
      handler: () => (deps.bigKeys === null
        ? jsonResponse(200, { enabled: false, keys: [] })
        : jsonResponse(200, { enabled: true, topK: deps.bigKeys.topK, keys: deps.bigKeys.top() })),
    },
  ];
}
