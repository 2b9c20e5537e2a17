import type { Logger } from 'pino';
import type { RespoolConfig } from './config/types.js';
import type { Metrics } from './metrics/metrics.js';
import type { TopologyRefresher } from './cluster/topology-refresher.js';
import type { UpstreamPools } from './upstream/upstream-pools.js';
import type { HotKeys } from './hotkeys/hot-keys.js';
import { decodeReply, RespError } from './resp/decode.js';
import { AUTO_SHARE, MemoryCeiling, resolveMaxMemory, type MemoryHolder } from './client/memory-ceiling.js';
import { cgroupMemoryLimit } from './util/cgroup-memory.js';
import { RequestObserver } from './observe/request-observer.js';
import { NodeSaturation } from './observe/node-saturation.js';
import { BigKeys } from './observe/big-keys.js';
import { oneShotCommand } from './upstream/one-shot.js';
import { ScriptLineRelay } from './client/script-line-relay.js';
import { Link } from './upstream/link.js';
import { MonitorFeed } from './client/monitor-feed.js';
import { ScriptCommands } from './client/script-commands.js';
import { describeClient } from './client/client-address.js';

export interface ObservabilityDeps {
  config: RespoolConfig;
  metrics: Metrics;
  log: Logger;
  refresher: TopologyRefresher;
  pools: UpstreamPools;
  hotKeys: HotKeys;
  /** The client sessions: what the memory ceiling weighs. */
  sessions: () => Iterable<MemoryHolder>;
}

/**
 * What respool sees of the requests it serves and of what it holds, built once at start: the slow
 * log, command log and per-command latency (observe/request-observer.ts), big keys, saturated
 * nodes, the memory ceiling (limits.maxMemory), MONITOR's feed and the scripts' commands for the
 * slow log. Started and stopped by
 * server.ts (saturation.start / stop, memory.close).
 */
export function startObservability(deps: ObservabilityDeps): { observer: RequestObserver; bigKeys: BigKeys | null; saturation: NodeSaturation; memory: MemoryCeiling; monitors: MonitorFeed; scriptCommands: ScriptCommands } {
  const { config, metrics, log, refresher, pools, hotKeys } = deps;
  const sessions = deps.sessions;
  const observer = new RequestObserver(config, metrics, describeClient); // slow log, command log, per-command latency
  // Big keys: the reply sizes of the hot-key sampler's sampled requests (observe/big-keys.ts).
  const bigKeys = config.bigKeys.enabled ? new BigKeys(config.bigKeys.topK, () => refresher.current, metrics, config.hotKeys.detection.keyNamesInMetrics) : null;
  if (bigKeys !== null) hotKeys.sampled = (owner, key, slot, command) => owner.measureReply?.((bytes) => bigKeys.record(key, slot, command, bytes));
  // Saturated nodes: last-minute p99 or main-thread CPU from INFO cpu (observe/node-saturation.ts).
  const saturation = new NodeSaturation({
    config,
    topology: () => refresher.current,
    windows: metrics.windows,
    infoCpu: async (node) => {
      // an open shared link when there is one (no connection made); else one of its own, closed after
      const pool = pools.openPoolOf(node.address);
      const options = { host: node.host, port: node.port, auth: config.upstreamAuth, tls: config.upstreamTls, timeoutMs: config.timeouts.commandMs };
      const reply = decodeReply(pool !== undefined ? await pool.call(['INFO', 'cpu']) : await oneShotCommand(options, ['INFO', 'cpu']));
      if (reply instanceof RespError) throw new Error(reply.message);
      return Buffer.isBuffer(reply) ? reply.toString('latin1') : String(reply);
    },
    metrics,
    log,
  });

  // limits.maxMemory (client/memory-ceiling.ts): auto = a share of the container's memory limit
  // (util/cgroup-memory.ts) less what respool holds now, before any client.
  const cgroupLimit = cgroupMemoryLimit();
  const memory = new MemoryCeiling({
    limit: resolveMaxMemory(config.limits.maxMemory, cgroupLimit, process.memoryUsage.rss()),
    holders: sessions,
    linkBytes: () => pools.bufferedBytes(),
    rssLimit: config.limits.maxMemory === 'auto' && cgroupLimit !== null ? cgroupLimit * AUTO_SHARE : 0,
    rss: () => process.memoryUsage.rss(),
    log,
  });
  metrics.raw.memory_ceiling_bytes.set(memory.limit);

  // MONITOR's feed, with the nodes' script lines relayed while anyone monitors (client/script-line-relay.ts),
  // and the commands scripts run, for the slow log while it logs every command (client/script-commands.ts).
  const relay = new ScriptLineRelay({
    nodes: () => refresher.current?.allNodes() ?? [],
    open: (host, port) => new Link({
      host, port, protocol: 2, readonly: false, auth: config.upstreamAuth, tls: config.upstreamTls, clientName: 'respool-monitor',
      connectTimeoutMs: config.timeouts.connectMs, commandTimeoutMs: config.timeouts.commandMs,
    }),
    deliver: (line) => monitors.deliver(line),
    keepLines: () => config.slowlog.maxLen,
  });
  const monitors: MonitorFeed = new MonitorFeed(relay);
  const scriptCommands = new ScriptCommands(relay, config);
  void scriptCommands.sync(); // slowlog.thresholdUs 0 from the start: the nodes are followed once the topology is known
  return { observer, bigKeys, saturation, memory, monitors, scriptCommands };
}
