import type { Logger } from 'pino';
import type { RespoolConfig } from './config/types.js';
import { CommandTable } from './commands/command-table.js';
import { decodeReply, RespError } from './resp/decode.js';
import type { TopologyRefresher } from './cluster/topology-refresher.js';
import type { Topology } from './cluster/topology.js';
import type { UpstreamPools } from './upstream/upstream-pools.js';
import type { Socket } from 'node:net';
import { ClientSession } from './session/client-session.js';
import { handOverSessions, restoreSnapshot, type ClientSnapshot, type HandOver } from './session/session-handover.js';
import { TlsRelays } from './session/tls-relay.js';
import type { ParkedPops } from './parking/parked-pops.js';
import type { ServerContext } from './client/server-context.js';
import { Metrics } from './metrics/metrics.js';
import { createLogger } from './util/logger.js';
import { RateLimitedLog } from './util/rate-limited-log.js';
import { reloadProxy, type ReloadResult } from './config/reload.js';
import { HotKeys } from './hotkeys/hot-keys.js';
import { ReadRouting } from './routing/read-strategy.js';
import { resolveOwnZone } from './cluster/zone-discovery.js';
import { addressOf, announceAddress, ClusterEmulation } from './fleet/cluster-emulation.js';
import { Membership } from './fleet/membership.js';
import { FleetStore } from './fleet/fleet-store.js';
import { FleetState, usesFleetState } from './fleet/fleet-state.js';
import { fleetView } from './fleet/fleet-view.js';
import { dnsResolver, type PeerResolver } from './fleet/peer-sources.js';
import { FairAdmission } from './client/fair-admission.js';
import { ClientPause } from './client/client-pause.js';
import { Migration } from './migration/migration.js';
import { migrationForThisProcess } from './migration/migration-process.js';
import { SignIns } from './migration/sign-ins.js';
import { CutoverRecord } from './migration/cutover-record.js';
import { followRecordedMove } from './migration/upstream-switch.js';
import { MigrationMember } from './migration/migration-member.js';
import { PeerBroadcast } from './workers/peer-broadcast.js';
import { FleetBroadcast } from './fleet/fleet-broadcast.js';
import { beginPeerFlush, endPeerFlush } from './handlers/namespace-scope.js';
import cluster from 'node:cluster';
import { FleetMigration } from './migration/fleet-migration.js';
import { migrateReply } from './handlers/respool-migrate.js';
import { CommandFlag } from './commands/command-flags.js';
import { reloadUpstreamTls } from './upstream/dial.js';
import { UserDirectory, type DirectoryClient } from './acl/user-directory.js';
import { FleetAcl } from './fleet/fleet-acl.js';
import type { IdentityMirror } from './upstream/identity-mirror.js';
import { TenantDirectory } from './tenants/tenant-directory.js';
import { changedLimits } from './tenants/limit-changes.js';
import { TenantShedding } from './tenants/tenant-shedding.js';
import { FleetTenants } from './fleet/fleet-tenants.js';
import { Backend, tenantBackends } from './backend.js';
import { startSampler } from './server-sampler.js';
import { startAdmin } from './server-admin.js';
import { ClientListeners } from './server-listeners.js';
import { startObservability } from './server-observability.js';
import { startTenantBudgets } from './workers/tenant-usage.js';

export interface RespoolProxy {
  /** The running configuration (a reload changes it in place). */
  readonly config: RespoolConfig;
  /** The address clients connect to (the real port when listen.port was 0). */
  readonly address: { host: string; port: number };
  /** The Unix socket clients may connect to (config.unixSocket), or null. */
  readonly unixSocket: string | null;
  readonly adminAddress: { host: string; port: number } | null;
  /** The TLS listener's address (config.listenTls), or null when there is none. */
  readonly tlsAddress: { host: string; port: number } | null;
  /**
   * Reads the TLS certificate files again (tls.*: the listener's, upstreamTls.*: respool's own to
   * the nodes): new connections use them, established ones are kept. Throws, keeping the old
   * certificates, when a file cannot be read or parsed.
   */
  reloadTls(): void;
  /**
   * SIGHUP: applies a config validated by parseCommandLine without dropping clients; settings
   * that need a restart are logged and kept (src/config/reload.ts). Logs one reload_applied line.
   */
  reload(next: RespoolConfig): ReloadResult;
  readonly metrics: Metrics;
  readonly pools: UpstreamPools;
  readonly refresher: TopologyRefresher;
  /** Hot-key detection and split copies. */
  readonly hotKeys: HotKeys;
  /** respool's users (config, ACL file, ACL SETUSER). */
  readonly users: UserDirectory;
  /** Mirrored users on the nodes. */
  readonly mirror: IdentityMirror;
  readonly parking: ParkedPops; // blocked pops parked at respool (the main upstreams')
  /** Changes a tenant's limits here (and in a fleet with shared state, everywhere): RESPOOL TENANT SET from another worker. */
  changeTenantLimits(name: string, changes: ReadonlyArray<readonly [string, unknown]>): Promise<string | null>;
  /** The fleet's members and their states (null without cluster.peers / peersFrom). */
  readonly membership: Membership | null;
  /** The fleet's shared runtime state (null unless cluster.fleetState is in use). */
  readonly fleetState: FleetState | null;
  clientCount(): number;
  /**
   * Stops accepting, waits up to drainMs for in-flight requests, then closes everything. With
   * `handOver` (a takeover's old process): plain client connections go to the new process
   * instead of being closed (session/session-handover.ts).
   */
  close(drainMs?: number, handOver?: HandOver): Promise<void>;
  /** A takeover's TLS clients this process still relays to the new one after close() (session/tls-relay.ts). */
  readonly tlsRelays: TlsRelays;
  /** In a takeover's new process: a client connection handed over by the old one, its state put back. */
  adopt(socket: Socket, snapshot: ClientSnapshot): void;
}

/** Valkey's default `databases`: SELECT's bound when the upstream does not say. */
const DEFAULT_DATABASES = 16;

/** How long start-up waits for the first topology before listening anyway (readyz says why). */
const STARTUP_TOPOLOGY_WAIT_MS = 5_000;
/** How long start-up waits for the fleet's shared state. */
const FLEET_START_WAIT_MS = 3_000;
/** The longest a process waits for the others' acks of a broadcast (workers/peer-broadcast.ts, fleet/fleet-broadcast.ts). */
const PEER_ASK_MS = 1_000;

/** Wires config → pools, topology, router, admin, and the client listener. */
export interface StartOptions {
  log?: Logger;
  configFile?: string;
  /** How cluster.peersFrom names are resolved (default: DNS, fleet/peer-sources.ts); tests pass their own. */
  peerResolver?: PeerResolver;
}

export async function startProxy(config: RespoolConfig, options: StartOptions = {}): Promise<RespoolProxy> {
  const startedAt = Date.now();
  const log = options.log ?? createLogger(config.logLevel);
  let table = CommandTable.builtin();
  const metrics = new Metrics({ knownCommands: table.names() });
  // Operator event lines (node lost/back, circuits, topology changes, shedding, reloads): one
  // per second per kind and node at most, with a `suppressed` count (util/rate-limited-log.ts).
  const events = new RateLimitedLog(log);
  const reads = new ReadRouting(config.reads, log, metrics);
  // Before anything connects: the credentials the process starts with (a cutover replaces them in
  // the config), and where an earlier run's cutover moved the upstreams (src/migration).
  const signIns = new SignIns(config);
  const cutoverRecord = new CutoverRecord(config.migration.stateFile, config.upstreams, log);
  followRecordedMove({ config, signIns, record: cutoverRecord, log });
  // respool's own zone (config, RESPOOL_ZONE, or opt-in metadata lookup bounded by reads.metadataTimeoutMs).
  const ownZone = resolveOwnZone(config.reads, process.env, log).then((z) => reads.setOwnZone(z.zone, z.source));
  // A fleet's runtime state (split rules, copy fills, the write lease) in the upstream (src/fleet).
  let fleetState = null as FleetState | null;
  let fleetStore = null as FleetStore | null;
  const fleetOf = (refresher: TopologyRefresher, pools: UpstreamPools) => {
    if (!usesFleetState(config)) return null;
    const store = (fleetStore = new FleetStore({ config, refresher, pools, log }));
    fleetState = new FleetState({ store, leaseMs: config.cluster.fleetLeaseMs, log, metrics });
    return { state: fleetState, store };
  };
  const sessions = new Set<ClientSession>();
  // respool's users: the configuration's, the ACL file's, ACL SETUSER's (src/acl/user-directory.ts).
  const directoryClients = function* (): Iterable<DirectoryClient> {
    for (const s of sessions) {
      yield {
        id: s.id,
        user: s.state.user,
        subscribedNames: () => {
          const subs = s.state.subscriptions;
          if (subs === null || subs.total() === 0) return null;
          return { channels: subs.names('channel'), patterns: subs.names('pattern'), shardChannels: subs.names('shard') };
        },
        close: (afterReply) => (afterReply ? s.closeAfterReplies() : s.destroy()),
      };
    }
  };
  const users = new UserDirectory(config, () => table, directoryClients, (user, reason) => metrics.raw.acl_denials_total.labels(user, reason).inc());
  // The main upstreams (config.upstreams): pools, topology, router, leases, subscriptions, hot keys (backend.ts).
  const main = new Backend(config, { metrics, events, log, reads, users, fleet: fleetOf });
  const { pools, refresher, router, hotKeys, dedicated, pubsub, mirror, hello } = main;
  metrics.upstreamTraffic = pools.load; // respool_upstream_{sent,received}_bytes_total
  metrics.nearCacheAtScrape(() => main.nearCache.stats()); // respool_near_cache_*
  // A fleet: users changed at run time through any member reach every member (fleet/fleet-acl.ts).
  const fleetAcl = fleetState === null ? null : new FleetAcl(fleetState, users, log);
  const sessionsById = new Map<number, ClientSession>();
  let clientIds = 0;
  // The cluster clients are shown (handlers/cluster.ts): this instance alone until the fleet's
  // membership (src/fleet) is known, once listening (its port is the bound one). Built when first
  // asked for: its node ids are SHA-1s, and a sidecar no client asks CLUSTER … of never loads
  // node:crypto (util/lazy-builtins.ts).
  let announced = announceAddress(config, config.listen?.port ?? 0);
  let emulation: ClusterEmulation | null = null;
  const currentEmulation = () => (emulation ??= ClusterEmulation.ofPeers(announced, []));
  let membership: Membership | null = null;
  let topologyEpoch = 0;
  // What a request cost and what respool holds: slow log, big keys, saturated nodes, the memory ceiling, MONITOR's feed (server-observability.ts).
  const { observer, bigKeys, saturation, memory, monitors, scriptCommands } = startObservability({ config, metrics, log, refresher, pools, hotKeys, sessions: () => sessions });

  // Applications sharing this respool: each configured user's tenant, its limits and counts (src/tenants).
  const tenants = new TenantDirectory(config.tenants, config.users);
  for (const tenant of tenants.list()) tenant.measureLatency(metrics.windows.tenant(tenant.name)); // its clients' p50/p99
  // A fleet: tenants' limits changed at run time through any member reach every member (fleet/fleet-tenants.ts).
  const fleetTenants = fleetState === null ? null : new FleetTenants(fleetState, tenants);
  const changeTenantLimits = async (name: string, changes: ReadonlyArray<readonly [string, unknown]>): Promise<string | null> => {
    const tenant = tenants.get(name);
    if (tenant === undefined) return `no tenant '${name}' (${tenants.list().map((t) => t.name).join(', ') || 'none are configured'})`;
    const next = changedLimits(tenant.budget, changes);
    if (typeof next === 'string') return next;
    tenants.setLimits(name, next);
    log.info({ event: 'tenant_limits', tenant: name, limits: next }, `tenant ${name}: limits changed at run time`);
    if (fleetTenants !== null) await fleetTenants.share(name, next);
    return null;
  };
  metrics.tenantsAtScrape(() => tenants.list());
  // A live migration of the main upstreams to another (src/migration): RESPOOL MIGRATE, /migration.
  const clientPause = new ClientPause();
  const fleetShared = fleetState === null || fleetStore === null ? null : { state: fleetState as FleetState, store: fleetStore as FleetStore };
  const processMigration = migrationForThisProcess(fleetShared, migrateReply, {
    config,
    log,
    refresher,
    dedicated,
    clientPause,
    isWrite: (command) => ((table.get(command)?.flags ?? 0) & CommandFlag.WRITE) !== 0,
    writesBefore: async () => {
      await Promise.all((refresher.current?.primaries() ?? []).map((n) => pools.barrier(n.address)));
    },
    onCutover: () => main.nearCache.flush(), // its entries were kept exact by the source's tracking
    signIns,
    record: cutoverRecord,
    clientLatency: metrics.windows.recent, // the scan's pace is held to this process's clients' p99 (migration/latency-guard.ts)
  });
  // With workers, worker 0 runs the migration and the others carry their clients' writes
  // (migration-members.ts); in a fleet, the member that ran START (fleet-migration.ts).
  const migration = processMigration.migration;
  // Only the migration's own process reports it: the supervisor sums the workers' series.
  if (!(migration instanceof MigrationMember)) metrics.migrationAtScrape(() => (migration instanceof FleetMigration ? migration.local.status() : migration.status())); // respool_migration_*
  // With workers or in a fleet: what one process asks of all the others now (a namespace's flush:
  // its tracking clients on every worker and member). In a fleet each worker is a member, and the
  // fleet's bus reaches them all; otherwise the supervisor passes it on.
  const peers = fleetState === null ? new PeerBroadcast() : new FleetBroadcast(fleetState);
  peers.handle('namespace-flush-begin', (p) => {
    const { id, pattern } = p as { id: string; pattern: string };
    beginPeerFlush(sessions, id, Buffer.from(pattern, 'base64'));
  });
  peers.handle('namespace-flush-end', (p) => endPeerFlush((p as { id: string }).id));
  const ctx: ServerContext = {
    config,
    memory,
    ...main.context, // router, hot keys, leases, subscriptions, scripts, what the nodes are (backend.ts)
    log,
    metrics,
    users,
    tenants,
    fleetAcl,
    changeTenantLimits,
    admission: new FairAdmission((lane) => metrics.raw.admission_wait_seconds.labels(lane)),
    clientPause,
    migration,
    monitors,
    scriptCommands,
    namespaceFlushPeers: cluster.isWorker || fleetState !== null ? {
      begin: (id, pattern) => peers.ask('namespace-flush-begin', { id, pattern: pattern.toString('base64') }, PEER_ASK_MS),
      end: (id) => peers.ask('namespace-flush-end', { id }, PEER_ASK_MS),
    } : undefined,
    observer,
    saturation,
    bigKeys,
    sessions: () => sessions,
    sessionById: (id) => sessionsById.get(id),
    contextOf: (tenant) => (tenant === null ? ctx : ownUpstreams.get(tenant)?.context ?? ctx),
    commands: () => table,
    clusterView: currentEmulation,
    fleetView: () => fleetView(membership, currentEmulation(), fleetState),
    nextClientId: () => ++clientIds,
    onSessionClosed: (session) => {
      ctx.monitors.remove(session);
      sessions.delete(session as ClientSession);
      sessionsById.delete(session.id);
      metrics.clientConnections.dec();
    },
    facts: {
      startedAt,
      configFile: options.configFile ?? null,
      topologyEpoch: () => topologyEpoch,
      linksByNode: () => pools.openLinksByNode(),
      circuitState: (address) => pools.health(address).circuit.state,
      zone: () => reads.ownZone,
    },
  };

  // Tenants with upstreams of their own: a backend each, their clients a context each (backend.ts).
  const ownUpstreams = tenantBackends(ctx, tenants.list(), { metrics, events, log, reads, users });

  // acl.upstream auto: whether the main upstreams' nodes let respool mirror users (backend.ts).
  const checkMirrorAllowed = () => main.checkMirrorAllowed();

  // After each discovery (backend.ts does its own part): learn the upstream's command table when
  // the first primary changed. A MOVED patch removes no node and keeps the first shard.
  let learnedFrom = '';
  refresher.onChange((topology: Topology, change) => {
    if (change === 'moved') return;
    monitors.topologyChanged();
    topologyEpoch++;
    void checkMirrorAllowed(); // acl.upstream auto: whether the nodes still let respool mirror users
    const primary = topology.shards[0]?.primary;
    if (!primary || primary.address === learnedFrom) return;
    learnedFrom = primary.address;
    main.askFirstPrimary(['COMMAND']).then((frame) => {
      const reply = decodeReply(frame);
      if (!(reply instanceof RespError)) {
        table = CommandTable.fromCommandInfo(reply);
        metrics.setKnownCommands(table.names());
      }
    }).catch((err: Error) => log.warn({ err: err.message }, 'COMMAND failed; keeping the built-in command table'));
  });

  // Where clients come in, and the client-side storm guards (server-listeners.ts).
  const listeners = new ClientListeners({
    config, log, metrics, events,
    clientCount: () => sessions.size,
    admit: (socket) => {
      const session = new ClientSession(socket, ctx);
      sessions.add(session);
      sessionsById.set(session.id, session);
      session.socket.resume(); // accepted paused (pauseOnConnect)
    },
  });

  metrics.windows.start(); // last-minute latency per node and family, and second by second (metrics/latency-windows.ts)
  // Queue depths and what respool holds, sampled once a second (server-sampler.ts).
  const sampler = startSampler({ metrics, parkedClients: () => listeners.parkedCount, pools, dedicated, sessions: () => sessions, memory, fleetState });

  const firstTopology = refresher.start();
  const tenantTopologies = [...ownUpstreams.values()].map(({ backend }) => backend.refresher.start()); // each discovery also learns HELLO (backend.ts)
  await ownZone;
  await Promise.race([Promise.all([firstTopology, ...tenantTopologies]), new Promise((r) => setTimeout(r, STARTUP_TOPOLOGY_WAIT_MS).unref())]);
  // A tenant whose upstreams cannot be reached yet: its clients get CLUSTERDOWN until they can.
  for (const [tenant, { backend }] of ownUpstreams) {
    if (backend.refresher.current === null) log.warn({ event: 'tenant_upstream_down', tenant: tenant.name, upstreams: tenant.upstreams }, `tenant ${tenant.name}: its upstreams cannot be reached yet; its clients get CLUSTERDOWN until they can`);
  }
  // Before the first client: its user's identity, HELLO's server name (bounded: a node that does not answer delays nobody long).
  await Promise.race([Promise.all([checkMirrorAllowed(), hello.learn()]), new Promise((r) => setTimeout(r, STARTUP_TOPOLOGY_WAIT_MS).unref())]);
  saturation.start();
  await processMigration.start(); // a migration this process ran before a restart goes on (migration.stateFile), or a worker joins one
  // A saturated node slows the lowest-priority tenants first (tenants/tenant-shedding.ts).
  const shedding = tenants.list().length === 0 ? null : new TenantShedding(
    () => tenants.list(),
    () => saturation.states().filter((n) => n.saturated),
    (tenant, rate, why) => events.emit(rate === null ? 'info' : 'warn', 'tenant_shed', `tenant|${tenant.name}`, { tenant: tenant.name, priority: tenant.priority, opsPerSecond: rate === null ? null : Math.round(rate), reason: why },
      rate === null ? `tenant ${tenant.name}: no longer slowed (${why})` : `tenant ${tenant.name} (priority ${tenant.priority}) slowed to ${Math.round(rate)} requests/s: ${why}`),
  );
  shedding?.start();

  // The fleet's shared state is read before clients are served (at most FLEET_START_WAIT_MS: an
  // unreachable state shard does not stop start-up): here when the announce address is known
  // already, else once listening has bound the port (listen.port 0).
  let fleetStarted = false;
  const startFleetState = async (announce: { host: string; port: number }) => {
    fleetStarted = true;
    const worker = process.env['RESPOOL_WORKER_INDEX']; // each worker registers apart
    fleetState!.identify(worker === undefined ? addressOf(announce) : `${addressOf(announce)}#w${worker}`, addressOf(announce));
    await fleetState!.start(FLEET_START_WAIT_MS);
    hotKeys.seedFleet();
  };
  const listen = config.listen;
  if (fleetState !== null && (config.cluster.announce !== null || (listen !== null && listen.port !== 0))) await startFleetState(announceAddress(config, listen?.port ?? 0));

  const { address, tlsAddress } = await listeners.listen();
  const announce = announceAddress(config, address.port);
  announced = announce;
  emulation = null;
  if (fleetState !== null && !fleetStarted) await startFleetState(announce);
  // A fleet (cluster.peers, cluster.peersFrom): members are checked on their announce addresses
  // and the slots divided among the live ones (fleet/membership.ts, fleet/slot-division.ts).
  if (config.cluster.peers.length > 0 || config.cluster.peersFrom !== null) {
    const m = new Membership({
      self: announce,
      peers: config.cluster.peers,
      peersFrom: config.cluster.peersFrom,
      resolver: options.peerResolver ?? dnsResolver(),
      timings: {
        checkMs: config.cluster.peerCheckMs,
        checkTimeoutMs: config.cluster.peerCheckTimeoutMs,
        downAfterMs: config.cluster.peerDownAfterMs,
        rejoinAfterMs: config.cluster.peerRejoinAfterMs,
        resolveMs: config.cluster.peersResolveMs,
      },
      log,
      events,
    });
    const showFleet = () => {
      emulation = new ClusterEmulation(m.members());
      for (const [state, n] of Object.entries(m.counts())) metrics.raw.fleet_members.labels(state).set(n);
    };
    m.onChange(showFleet);
    showFleet();
    membership = m;
    await m.start();
  }

  // Tenants' limits over every worker and fleet member together: each takes its share (tenants/tenant-budgets.ts).
  const budgets = startTenantBudgets({ tenants: tenants.list(), fleetState, membership, log });

  // The admin endpoint: /metrics, /readyz, /config, /fleet, /hotkeys, /tenants, the status page … (server-admin.ts).
  const admin = config.admin === null ? null : await startAdmin(config.admin, {
    config, log, metrics, pools, refresher, hotKeys, dedicated, nearCache: main.nearCache, migration, parking: main.parking, observer, saturation, events, bigKeys, tenants, memory, changeTenantLimits,
    sessions: () => sessions,
    fleet: () => fleetView(membership, currentEmulation(), fleetState),
  });
  log.info({ listen: listen === null ? null : address, unixSocket: config.unixSocket, listenTls: tlsAddress, admin: admin?.address ?? null, upstreams: config.upstreams, mode: config.mode }, 'respool listening');

  let closing: Promise<void> | null = null;
  const tlsRelays = new TlsRelays(); // a takeover's TLS clients, relayed to the new process (close with handOver)
  return {
    config,
    address,
    unixSocket: config.unixSocket,
    adminAddress: admin?.address ?? null,
    tlsAddress,
    reloadTls() {
      listeners.reloadTls();
      reloadUpstreamTls(config.upstreamTls);
      for (const { backend } of ownUpstreams.values()) reloadUpstreamTls(backend.config.upstreamTls); // tenants' own
      log.info({ listenTls: tlsAddress, upstreamTls: config.upstreamTls.enabled }, 'TLS certificates reloaded');
    },
    reload(next) {
      const allPools = { reconfigure: () => [pools, ...[...ownUpstreams.values()].map((o) => o.backend.pools)].forEach((p) => p.reconfigure()) }; // tenants' own too
      const result = reloadProxy({ config, log, pools: allPools, reads, hotKeys, users, tenants, reloadTls: () => (this as RespoolProxy).reloadTls() }, next);
      listeners.applySocketOptions(); // clients.tcpKeepAliveMs for connections accepted from now on
      void scriptCommands.sync(); // slowlog.thresholdUs 0: the scripts' commands are logged (client/script-commands.ts)
      return result;
    },
    metrics,
    pools,
    refresher,
    hotKeys,
    users,
    mirror, parking: main.parking,
    changeTenantLimits,
    membership,
    fleetState,
    clientCount: () => sessions.size,
    tlsRelays,
    adopt(socket, snapshot) {
      const session = new ClientSession(socket, ctx);
      if (!restoreSnapshot(session.state, snapshot, users)) {
        socket.destroy();
        return;
      }
      sessions.add(session);
      sessionsById.set(session.id, session);
      metrics.clientConnections.inc();
      if (snapshot.unread !== '') session.socketData(Buffer.from(snapshot.unread, 'base64')); // read by the old process, not handled there
      socket.resume();
    },
    close(drainMs = 0, handOver) {
      closing ??= (async () => {
        // Graceful drain: stop accepting; every client gets the replies it is owed, then its
        // connection is closed (or, in a takeover, handed to the new process); whatever is left
        // at the deadline is cut.
        listeners.close();
        const deadline = Date.now() + drainMs;
        if (handOver !== undefined) {
          const handed = await handOverSessions(sessions, handOver, deadline, tlsRelays, (session) => session.drain());
          log.info({ event: 'clients_handed_over', clients: handed }, `handed ${handed} client connections to the new process`);
        }
        for (const session of sessions) session.drain();
        while (Date.now() < deadline && sessions.size > 0) {
          await new Promise((r) => setTimeout(r, 20));
        }
        for (const session of [...sessions]) {
          if (session.pending > 0) metrics.raw.client_disconnects_total.labels('drain_deadline').inc();
          session.destroy();
        }
        clearInterval(sampler);
        memory.close();
        membership?.stop();
        budgets?.stop();
        shedding?.stop();
        fleetState?.stop();
        metrics.windows.stop();
        saturation.stop();
        scriptCommands.close();
        migration.close();
        await main.close();
        for (const { backend } of ownUpstreams.values()) await backend.close();
        await admin?.close();
        log.info('respool stopped');
      })();
      return closing;
    },
  };
}
