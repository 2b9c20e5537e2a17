import { parseCommandLine, ConfigError } from './config/load-config.js';
import { startProxy } from './server.js';
import { createLogger } from './util/logger.js';
import cluster from 'node:cluster';
import { aggregatorRegistry } from './metrics/prom-client-parts.js';
import { runSupervisor, workerCount, WORKER_ADMIN_MESSAGE } from './workers/supervisor.js';
import { isPeerAcl, isPeerTenant, onPeerCommand, shareAutoSplit } from './workers/peer-commands.js';
import { limitPairs } from './tenants/limit-changes.js';
import { applyAclChange } from './handlers/acl.js';
import { serveWorkerReports } from './workers/hot-key-reports.js';
import { runRespoolCommand } from './hotkeys/control.js';
import { useSingleThreadedScavenges } from './util/gc-tuning.js';
import { CLIENT_HANDOVER_MESSAGE, RETIRE_MESSAGE } from './workers/takeover.js';
import type { ClientSnapshot, HandOver } from './session/session-handover.js';
import type { Socket } from 'node:net';
import { RELAY_MAX_MS } from './session/tls-relay.js';

/** Graceful drain on SIGTERM/SIGINT: in-flight requests get this long to finish. */
const DRAIN_MS = 10_000;

/** The `respool` command: flags + config file → a running proxy. Exit 2 on bad config. */
export async function main(argv: string[]): Promise<void> {
  let parsed;
  try {
    parsed = parseCommandLine(argv, process.env);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`respool: ${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
  if (parsed.kind !== 'run') {
    process.stdout.write(parsed.text.endsWith('\n') ? parsed.text : `${parsed.text}\n`);
    return;
  }
  useSingleThreadedScavenges();
  const log = createLogger(parsed.config.logLevel);
  // workers: N > 1 (or supervised: true) — this process supervises N respool processes sharing
  // the listen sockets (src/workers); SIGUSR2 replaces them without dropping a client.
  const workers = workerCount(parsed.config.workers);
  if ((workers > 1 || parsed.config.supervised) && cluster.isPrimary) return runSupervisor(parsed.config, workers, log, DRAIN_MS);
  const inWorker = cluster.isWorker;
  // A worker's admin server: a loopback port of its own, reached through the supervisor's.
  if (inWorker && parsed.config.admin !== null) parsed.config.admin = { host: '127.0.0.1', port: 0 };
  let proxy;
  try {
    proxy = await startProxy(parsed.config, { log, ...(parsed.configFile !== undefined ? { configFile: parsed.configFile } : {}) });
  } catch (err) {
    log.fatal({ err: (err as Error).message }, 'respool could not start');
    process.exit(1);
  }
  if (inWorker) {
    // The supervisor's /metrics sums the workers': constructing an AggregatorRegistry installs
    // prom-client's worker-side IPC listener, which answers with these registries.
    const AggregatorRegistry = aggregatorRegistry();
    AggregatorRegistry.setRegistries([proxy.metrics.registry]);
    new AggregatorRegistry();
    process.send?.({ type: WORKER_ADMIN_MESSAGE, admin: proxy.adminAddress });
    const hotKeys = proxy.hotKeys;
    // Another worker's RESPOOL SPLIT change, or ACL SETUSER / DELUSER / LOAD (src/workers/peer-commands.ts).
    const users = proxy.users;
    onPeerCommand((args) => {
      if (isPeerAcl(args)) applyAclChange(users, args, null);
      else if (isPeerTenant(args)) void proxy.changeTenantLimits(args[3]!.toString(), limitPairs(args, 4));
      else runRespoolCommand(hotKeys, args, 2);
    });
    hotKeys.onAutoSplit = shareAutoSplit; // this worker's automatic splits reach the others
    serveWorkerReports((current) => current ? hotKeys.currentWindow() : (hotKeys.lastWindow() ?? hotKeys.currentWindow()));
  }
  let stopping = false;
  // Client connections handed to the supervisor (a takeover): sent before this process exits,
  // or a socket still queued on the IPC channel would close with it.
  const handing: Array<Promise<void>> = [];
  const stop = (signal: string, handOver?: HandOver) => {
    if (stopping) process.exit(1); // a second signal: stop now
    stopping = true;
    log.info({ signal, drainMs: DRAIN_MS }, 'draining');
    void proxy.close(DRAIN_MS, handOver)
      .then(() => Promise.race([Promise.all(handing), new Promise((r) => setTimeout(r, 5000))]))
      .then(async () => {
        // A takeover's TLS clients stay here, relayed to the new worker (session/tls-relay.ts):
        // this process leaves the supervisor (the takeover goes on; it holds no upstream link)
        // and exits when the last of them closes, or closes them after RELAY_MAX_MS.
        if (proxy.tlsRelays.count === 0) return;
        log.info({ event: 'tls_clients_relayed', clients: proxy.tlsRelays.count }, `relaying ${proxy.tlsRelays.count} TLS client connections to the new process until they close`);
        cluster.worker?.disconnect();
        await proxy.tlsRelays.settle(RELAY_MAX_MS);
      })
      .then(() => process.exit(0));
  };
  if (inWorker) {
    // A takeover (workers/takeover.ts): this worker retires, handing its plain clients to its
    // replacement through the supervisor; a replacement adopts the ones handed to it.
    process.on('message', (msg: unknown, handle: unknown) => {
      const m = msg as { type?: string; snapshot?: ClientSnapshot } | null;
      if (m?.type === RETIRE_MESSAGE) {
        stop('takeover', (socket, snapshot) => {
          handing.push(new Promise((sent) => process.send!({ type: CLIENT_HANDOVER_MESSAGE, snapshot }, socket, undefined, () => sent())));
        });
      } else if (m?.type === CLIENT_HANDOVER_MESSAGE && m.snapshot !== undefined && handle != null) proxy.adopt(handle as Socket, m.snapshot);
    });
  }
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
  // A lone process has nobody to hold its sockets while it is replaced: SIGUSR2 (whose default
  // would end it and drop every client) says so and changes nothing.
  if (!inWorker) {
    process.on('SIGUSR2', () => log.warn({ event: 'takeover_unavailable' },
      'takeover (SIGUSR2) needs the supervisor: start respool with --supervised (or --workers 2 or more); this process keeps serving'));
  }
  // SIGHUP: the config file, environment and flags are read again as at start, with the same
  // validation and messages. A bad config is logged and the running one stays whole; a good one
  // is applied without dropping clients (users, limits, timeouts, reads, hot-key rules, TLS
  // certificates via proxy.reloadTls(), log level); settings that need a restart are logged.
  process.on('SIGHUP', () => {
    if (stopping) return;
    let next;
    try {
      next = parseCommandLine(argv, process.env);
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
      log.error({ event: 'reload_rejected', problems: err.problems, configFile: parsed.configFile ?? null },
        `config reload rejected, the running config stays in force: ${err.problems.join('; ')}`);
      proxy.metrics.raw.config_last_reload_successful.set(0);
      return;
    }
    if (next.kind !== 'run') return;
    try {
      if (inWorker && next.config.admin !== null) next.config.admin = parsed.config.admin; // its own port, as at start
      proxy.reload(next.config);
      proxy.metrics.raw.config_last_reload_successful.set(1);
      proxy.metrics.raw.config_last_reload_success_timestamp_seconds.set(Date.now() / 1000);
    } catch (err) {
      proxy.metrics.raw.config_last_reload_successful.set(0);
      log.error({ event: 'reload_rejected', err: (err as Error).message }, 'config reload failed part way');
    }
  });
}
