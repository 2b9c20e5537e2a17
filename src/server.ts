import net from 'node:net';
import type { Logger } from 'pino';
import type { RespoolConfig } from './config/types.js';
import { CommandTable } from './commands/command-table.js';
import { decodeReply, RespError } from './resp/decode.js';
import { TopologyRefresher } from './cluster/topology-refresher.js';
import { SLOT_COUNT, type Topology } from './cluster/topology.js';
import { UpstreamPools } from './upstream/upstream-pools.js';
import { Router } from './routing/router.js';
import { ClientSession } from './session/client-session.js';
import type { ServerContext } from './session/server-context.js';
import { Metrics } from './admin/metrics.js';
import { startAdminServer, type AdminServer } from './admin/admin-server.js';
import { createLogger } from './util/logger.js';

export interface RespoolProxy {
  /** The address clients connect to (the real port when listen.port was 0). */
  readonly address: { host: string; port: number };
  readonly adminAddress: { host: string; port: number } | null;
  readonly metrics: Metrics;
  readonly pools: UpstreamPools;
  readonly refresher: TopologyRefresher;
  clientCount(): number;
  /** Stops accepting, waits up to drainMs for in-flight requests, then closes everything. */
  close(drainMs?: number): Promise<void>;
}

/** How long start-up waits for the first topology before listening anyway (readyz says why). */
const STARTUP_TOPOLOGY_WAIT_MS = 5_000;

/** Wires config → pools, topology, router, admin, and the client listener. */
export async function startProxy(config: RespoolConfig, options: { log?: Logger } = {}): Promise<RespoolProxy> {
  const log = options.log ?? createLogger(config.logLevel);
  let table = CommandTable.builtin();
  const metrics = new Metrics({ knownCommands: table.names() });
  const pools = new UpstreamPools(config, metrics);
  const refresher = new TopologyRefresher({
    seeds: config.upstreams,
    mode: config.mode,
    pools,
    minIntervalMs: config.cluster.refreshMinIntervalMs,
    periodMs: config.cluster.refreshPeriodMs,
    log,
    metrics,
  });
  const router = new Router(refresher, pools, config.cluster, log, metrics);
  const sessions = new Set<ClientSession>();
  let clientIds = 0;
  let serverVersion = '8.0.0';

  const ctx: ServerContext = {
    config,
    router,
    log,
    metrics,
    commands: () => table,
    isCluster: () => refresher.current?.mode === 'cluster',
    serverVersion: () => serverVersion,
    nextClientId: () => ++clientIds,
    onSessionClosed: (session) => {
      sessions.delete(session);
      metrics.clientConnections.dec();
    },
  };

  // Learn the upstream's own command table and version once per new set of nodes.
  let learnedFrom = '';
  refresher.onChange((topology: Topology) => {
    pools.retainOnly(new Set(topology.allNodes().map((n) => n.address)));
    const primary = topology.shards[0]?.primary;
    if (!primary || primary.address === learnedFrom) return;
    learnedFrom = primary.address;
    const pool = pools.get(primary.host, primary.port, 2, 'primary');
    pool.call(['COMMAND']).then((frame) => {
      const reply = decodeReply(frame);
      if (!(reply instanceof RespError)) {
        table = CommandTable.fromCommandInfo(reply);
        metrics.setKnownCommands(table.names());
      }
    }).catch((err: Error) => log.warn({ err: err.message }, 'COMMAND failed; keeping the built-in command table'));
    pool.call(['INFO', 'server']).then((frame) => {
      const match = /^(?:valkey|redis)_version:(\S+)/m.exec(decodeReply(frame)?.toString() ?? '');
      if (match) serverVersion = match[1]!;
    }).catch(() => {});
  });

  const server = net.createServer({ noDelay: true }, (socket) => {
    metrics.clientConnectionsAccepted.inc();
    metrics.clientConnections.inc();
    sessions.add(new ClientSession(socket, ctx));
  });
  server.on('error', (err) => log.error({ err: err.message }, 'listener error'));

  const firstTopology = refresher.start();
  await Promise.race([firstTopology, new Promise((r) => setTimeout(r, STARTUP_TOPOLOGY_WAIT_MS).unref())]);

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.listen.port, config.listen.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const bound = server.address() as net.AddressInfo;
  const address = { host: config.listen.host, port: bound.port };

  let admin: AdminServer | null = null;
  if (config.admin) {
    admin = await startAdminServer(config.admin, metrics, {
      readiness: () => {
        const topology = refresher.current;
        if (topology === null) return { ready: false, reason: 'topology not known yet' };
        const covered = topology.coveredSlots();
        if (covered < SLOT_COUNT) return { ready: false, reason: `${SLOT_COUNT - covered} slots not covered` };
        return { ready: true };
      },
      topology: () => ({
        topology: refresher.current?.toJSON() ?? null,
        openLinksByNode: pools.openLinksByNode(),
        clients: sessions.size,
      }),
    });
  }
  log.info({ listen: address, admin: admin?.address ?? null, upstreams: config.upstreams, mode: config.mode }, 'respool listening');

  let closing: Promise<void> | null = null;
  return {
    address,
    adminAddress: admin?.address ?? null,
    metrics,
    pools,
    refresher,
    clientCount: () => sessions.size,
    close(drainMs = 0) {
      closing ??= (async () => {
        server.close();
        const deadline = Date.now() + drainMs;
        while (Date.now() < deadline && [...sessions].some((s) => s.pending > 0)) {
          await new Promise((r) => setTimeout(r, 20));
        }
        for (const session of sessions) session.socket.destroy();
        refresher.stop();
        pools.closeAll();
        await admin?.close();
        log.info('respool stopped');
      })();
      return closing;
    },
  };
}
