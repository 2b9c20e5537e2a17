import type { Logger } from 'pino';
import type { HostPort, RespoolConfig } from './config/types.js';
import type { Metrics } from './metrics/metrics.js';
import type { UpstreamPools } from './upstream/upstream-pools.js';
import type { NearCache } from './nearcache/near-cache.js';
import type { LeasePools } from './upstream/lease-pools.js';
import type { ParkedPops } from './parking/parked-pops.js';
import type { TopologyRefresher } from './cluster/topology-refresher.js';
import type { HotKeys } from './hotkeys/hot-keys.js';
import type { RequestObserver } from './observe/request-observer.js';
import type { NodeSaturation } from './observe/node-saturation.js';
import type { BigKeys } from './observe/big-keys.js';
import type { RateLimitedLog } from './util/rate-limited-log.js';
import type { TenantDirectory } from './tenants/tenant-directory.js';
import type { MemoryCeiling } from './client/memory-ceiling.js';
import type { FleetView } from './fleet/fleet-view.js';
import type { ClientSession } from './session/client-session.js';
import { isLoopback, startAdminServer, type AdminServer } from './admin/admin-server.js';
import { readiness } from './admin/readiness.js';
import { configRoute } from './admin/config-route.js';
import { observeRoutes } from './admin/observe-routes.js';
import { clientRoutes } from './admin/client-routes.js';
import { statusPageRoutes } from './admin/status-page.js';
import { tenantRoutes } from './admin/tenant-routes.js';
import { hotKeyRoutes } from './admin/hot-key-routes.js';
import { migrationRoutes } from './admin/migration-routes.js';
import type { MigrationHandle } from './migration/migration-process.js';

/** What the admin endpoint shows and steers of the running proxy. */
export interface AdminDeps {
  config: RespoolConfig;
  log: Logger;
  metrics: Metrics;
  pools: UpstreamPools;
  refresher: TopologyRefresher;
  hotKeys: HotKeys;
  dedicated: LeasePools;
  nearCache: NearCache;
  migration: MigrationHandle;
  parking: ParkedPops;
  observer: RequestObserver;
  saturation: NodeSaturation;
  events: RateLimitedLog;
  bigKeys: BigKeys | null;
  tenants: TenantDirectory;
  memory: MemoryCeiling;
  changeTenantLimits(name: string, changes: ReadonlyArray<readonly [string, unknown]>): Promise<string | null>;
  sessions(): Iterable<ClientSession>;
  fleet(): FleetView;
}

/**
 * The admin endpoint (config.admin) and every route on it: /readyz (topology known, every slot
 * owned, every owning primary reachable), /topology, /config (secrets redacted), /fleet,
 * /hotkeys, /migration, the observe routes (/latency, /slowlog, /nodes, /tenants …), /clients, POST
 * /tenants, the status page at /. Mutations need the admin token; without one they are refused.
 */
export async function startAdmin(address: HostPort, d: AdminDeps): Promise<AdminServer> {
  const { config, log, metrics, pools, refresher } = d;
  const admin = await startAdminServer(address, metrics, {
    readiness: () => {
      const links = pools.openLinksByNode();
      return readiness(refresher.current, (node, health) => {
        if (health === 'fail' || health === 'failed') return `the cluster marks it ${health}`;
        const { circuit } = pools.health(node);
        if (circuit.isOpen) return `circuit ${circuit.state}: ${circuit.lastError}`;
        if (!circuit.isHealthy && (links[node] ?? 0) === 0) return `link down: ${circuit.lastError}`;
        return null;
      });
    },
    topology: () => ({
      topology: refresher.current?.toJSON() ?? null,
      openLinksByNode: pools.openLinksByNode(),
      clients: [...d.sessions()].length,
    }),
  }, { token: () => config.adminToken, readToken: () => config.adminReadToken });
  if (config.adminToken === null) log.warn({ admin: admin.address }, 'no admin token configured: admin POST/DELETE are refused (set admin.token, --admin-token-file or RESPOOL_ADMIN_TOKEN)');
  if (!isLoopback(admin.address.host)) log.info({ admin: admin.address }, 'admin server listens beyond loopback: /metrics, /healthz, /readyz, /topology, /config are readable from the network');
  const register = (routes: Iterable<{ method: string; path: string; handler: Parameters<AdminServer['registerRoute']>[2] }>) => {
    for (const r of routes) admin.registerRoute(r.method, r.path, r.handler);
  };
  register(hotKeyRoutes(d.hotKeys));
  admin.registerRoute('GET', '/config', configRoute(config)); // the running config, secrets redacted
  // The fleet's members (state, last seen, slots, shared-state version), as RESPOOL FLEET.
  admin.registerRoute('GET', '/fleet', () => ({ status: 200, body: d.fleet() }));
  const nodes = {
    topology: () => refresher.current,
    links: () => pools.openLinksByNode(),
    leases: () => d.dedicated.stats().byNode,
    parked: () => d.parking.byNode(),
    circuit: (node: string) => pools.health(node).circuit.state,
  };
  register(observeRoutes({ metrics, observer: d.observer, saturation: d.saturation, events: d.events, bigKeys: d.bigKeys, nodes, tenants: () => d.tenants.list().map((t) => t.snapshot()) }));
  // What respool holds for its clients: the memory ceiling, the lanes, the clients holding the most.
  const clientFacts = function* () {
    for (const s of d.sessions()) yield { id: s.id, address: s.address, name: s.state.name ?? '', laneClass: s.laneClass, pending: s.pending, outputBytes: () => s.outputBytes(), queryBytes: () => s.queryBytes() };
  };
  register(clientRoutes({ clients: clientFacts, memory: d.memory, lanes: () => pools.inflightByLane() }));
  register(tenantRoutes(d.changeTenantLimits)); // POST /tenants: limits at run time
  // The near cache (src/nearcache), as RESPOOL CACHE STATS and KEYS: its counters and its most recently used keys.
  admin.registerRoute('GET', '/cache', (req) => {
    const asked = Number(req.url.searchParams.get('count') ?? '20');
    const count = Number.isSafeInteger(asked) && asked >= 0 ? Math.min(asked, 1000) : 20;
    const keys = d.nearCache.recentEntries(count).map((e) => ({ key: e.key.toString('latin1'), db: e.db, node: e.node, bytes: e.bytes }));
    return { status: 200, body: { configured: d.nearCache.active, ...d.nearCache.stats(), keys } };
  });
  register(migrationRoutes(d.migration)); // a live migration: GET /migration, POST /migration/start … (admin/migration-routes.ts)
  register(statusPageRoutes()); // the status page at /
  return admin;
}
