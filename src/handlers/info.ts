import { nodeCrypto, onFirstUse } from '../util/lazy-builtins.js';
import os from 'node:os';
import { encodeCommand, encodeError, encodeVerbatim } from '../resp/encode.js';
import { decodeReply, RespError } from '../resp/decode.js';
import { Fragmented } from '../routing/fragmented.js';
import type { CallOwner } from '../routing/upstream-call.js';
import type { ClusterNode, Topology } from '../cluster/topology.js';
import type { ProxyObservability, ServerContext, UpstreamSide } from '../client/server-context.js';
import { ProxyError } from '../errors.js';
import { RESPOOL_VERSION } from '../own-files.js';
import type { Handler, HandlerSession } from '../client/handler-session.js';
import {
  HEADERS, VALKEY_ORDER, fromOneNode, mergeCommandStats, mergeMemory, mergePersistence, mergeErrorStats, mergeKeyspace, mergeStats, parseInfoRequest,
  parseSections, renderSections, upstreamArgs, wants, type InfoRequest, type InfoSection,
} from './info-sections.js';

/**
 * `INFO clients` about respool's own clients (an upstream's clients would be respool's pooled
 * links). Field names and order as Valkey 8.0 prints them, so INFO parsers work unchanged; the
 * largest input / output buffers are the clients' now (not Valkey's few-second peaks);
 * cluster_connections is 0 (respool has no cluster bus); clients_in_timeout_table is left out
 * (respool does not keep one). Answered synchronously (handlers/local.ts).
 */
export function infoClients(session: HandlerSession): Buffer {
  return encodeVerbatim(renderSections([clientsSection(session)]), session.state.protocol);
}

function clientsSection(session: HandlerSession): InfoSection {
  let connected = 0;
  let blocked = 0;
  let pubsub = 0;
  let watching = 0;
  let tracking = 0;
  const blockingKeys = new Set<string>();
  const noKeyKeys = new Set<string>();
  const watchedKeys = new Set<string>();
  let maxInput = 0;
  let maxOutput = 0;
  for (const s of session.ctx.sessions()) {
    connected++;
    const state = s.state;
    const io = s.buffers();
    maxInput = Math.max(maxInput, io.queryBytes + io.argvBytes);
    maxOutput = Math.max(maxOutput, io.batchedBytes + io.heldReplyBytes + io.unsentBytes);
    if (state.blocked) {
      blocked++;
      for (const k of state.blockedKeys) {
        blockingKeys.add(k);
        if (state.blockedOnNoKey) noKeyKeys.add(k);
      }
    } else if (state.pausedHeld) {
      blocked++; // held by CLIENT PAUSE: Valkey counts postponed clients as blocked
    }
    if (state.subscriptions !== null && state.subscriptions.total() > 0) pubsub++;
    if (state.tracking !== null) tracking++;
    if (state.lane !== null) {
      watching++;
      for (const k of state.lane.watched) watchedKeys.add(k);
    }
  }
  return {
    header: HEADERS.clients,
    lines: [
      `connected_clients:${connected}`,
      'cluster_connections:0',
      `maxclients:${session.ctx.config.clients.maxClients}`,
      `client_recent_max_input_buffer:${maxInput}`,
      `client_recent_max_output_buffer:${maxOutput}`,
      `blocked_clients:${blocked}`,
      `tracking_clients:${tracking}`,
      `pubsub_clients:${pubsub}`,
      `watching_clients:${watching}`,
      `total_watched_keys:${watchedKeys.size}`,
      `total_blocking_keys:${blockingKeys.size}`,
      `total_blocking_keys_on_nokey:${noKeyKeys.size}`,
    ],
  };
}

/**
 * INFO [section …] (every form but `INFO clients`): respool answers for itself, in Valkey's
 * layout (server.c genValkeyInfoString) so INFO parsers work unchanged.
 *
 *   server, clients, respool   respool's own (server: the upstream's version, respool's process)
 *   stats                      respool's counters where it has them, the primaries' summed otherwise
 *   keyspace                   summed over the primaries (avg_ttl weighted by expires)
 *   memory                     bytes summed over the primaries (mergeMemory)
 *   persistence                in progress when any primary is, statuses err when any is (mergePersistence)
 *   commandstats, errorstats   summed per command / error over the primaries
 *   latencystats               respool's own per-command percentiles (observe/command-latency.ts)
 *   cpu, replication…          one primary's section, its first line `respool_source:<node>`
 *
 * The sections the primaries give are fetched with one `INFO …` to each primary (InfoFetch, a
 * Fragmented request); a primary that does not answer is left out (INFO respool counts them).
 * RESP3 clients get a verbatim string, RESP2 clients a bulk string, as from Valkey.
 */
export const info: Handler = (session, req) => {
  const ctx = session.ctx;
  const request = parseInfoRequest(req.args.slice(1).map((a) => a.toString('utf8')));
  ctx.metrics?.commandCounter('info').inc();
  const entry = session.reserve();
  const args = upstreamArgs(request);
  const topology = ctx.router.topology();
  const primaries = args === null || topology === null ? [] : primariesOf(topology);
  void ownCounters(ctx).then((own) => {
    const fetch = new InfoFetch(entry, session, request, own, primaries, Math.max(primaries.length, 1));
    if (primaries.length === 0) return fetch.onCallDone(Buffer.alloc(0), 0);
    const raw = encodeCommand(['INFO', ...args!]);
    primaries.forEach((node, index) => ctx.router.send({ to: 'node', owner: fetch, raw, command: 'info', node, role: 'primary', index }));
  }, (err: Error) => entry.fill(encodeError(ProxyError.cannotMerge('info', err.message))));
};

/** Primaries in slot order, so "one primary's section" is the same node from call to call. */
function primariesOf(topology: Topology): ClusterNode[] {
  return [...topology.shards].sort((a, b) => (a.slots[0]?.[0] ?? 0) - (b.slots[0]?.[0] ?? 0)).map((s) => s.primary);
}

/** One `INFO …` per primary; the merge builds the whole reply. */
class InfoFetch extends Fragmented {
  constructor(
    owner: CallOwner,
    private readonly session: HandlerSession,
    private readonly request: InfoRequest,
    private readonly own: ReadonlyMap<string, number>,
    private readonly primaries: readonly ClusterNode[],
    count: number,
  ) {
    super(owner, 'info', count);
  }

  protected merge(replies: Buffer[]): Buffer {
    const nodes: Array<{ address: string; sections: Map<string, InfoSection> }> = [];
    let unanswered = 0;
    this.primaries.forEach((node, i) => {
      const text = infoText(replies[i]!);
      if (text === null) unanswered++;
      else nodes.push({ address: node.address, sections: parseSections(text) });
    });
    const text = buildInfo(this.session, this.request, this.own, nodes, unanswered);
    return encodeVerbatim(text, this.session.state.protocol);
  }
}

/** A node's INFO reply as text; null for an error (or anything else). */
function infoText(frame: Buffer): string | null {
  if (frame.length === 0) return null;
  const value = decodeReply(frame);
  if (value instanceof RespError || value === null) return null;
  if (typeof value === 'string') return value;
  if (Buffer.isBuffer(value)) return value.toString('utf8');
  return null;
}

type NodeInfo = { address: string; sections: Map<string, InfoSection> };

function buildInfo(session: HandlerSession, request: InfoRequest, own: ReadonlyMap<string, number>, nodes: NodeInfo[], unanswered: number): string {
  const ctx = session.ctx;
  const all = (key: string) => nodes.map((n) => n.sections.get(key)).filter((s): s is InfoSection => s !== undefined);
  const out: InfoSection[] = [];
  for (const section of VALKEY_ORDER) {
    if (!wants(request, section)) continue;
    switch (section) {
      case 'server':
        out.push(serverSection(session, all('server')[0]));
        break;
      case 'clients':
        out.push(clientsSection(session));
        break;
      case 'stats':
        out.push(mergeStats(all('stats'), own));
        break;
      case 'commandstats':
        out.push(mergeCommandStats(all('commandstats')));
        break;
      case 'errorstats':
        out.push(mergeErrorStats(all('errorstats')));
        break;
      case 'keyspace':
        out.push(mergeKeyspace(all('keyspace')));
        break;
      case 'memory':
        out.push(mergeMemory(all('memory')));
        break;
      case 'persistence':
        out.push(mergePersistence(all('persistence')));
        break;
      case 'latencystats':
        // respool's per-command histograms (receive → reply written), Valkey's line format
        out.push({ header: HEADERS.latencystats, lines: ctx.observer?.commands.infoLines() ?? [] });
        break;
      default:
        out.push(fromOneNode(section, HEADERS[section], nodes));
    }
  }
  if (wants(request, 'respool')) out.push(respoolSection(ctx, unanswered));
  // Module sections (INFO everything, or asked by name) and `debug`: one primary's, in its order.
  const known = new Set<string>(VALKEY_ORDER);
  const first = nodes[0];
  if (first !== undefined) {
    for (const key of first.sections.keys()) {
      if (!known.has(key)) out.push(fromOneNode(key, first.sections.get(key)!.header, [first]));
    }
  }
  return renderSections(out);
}

/** respool's own counters for `# Stats` (the metrics are read asynchronously, so before the fetch). */
async function ownCounters(ctx: UpstreamSide & ProxyObservability): Promise<Map<string, number>> {
  const own = new Map<string, number>();
  const hub = ctx.pubsub.stats();
  own.set('pubsub_channels', hub.channels);
  own.set('pubsub_patterns', hub.patterns);
  own.set('pubsubshard_channels', hub.shardChannels);
  // respool's tracking table (client/tracked-keys.ts): the one tracking-table-max-keys bounds.
  if (ctx.trackedKeys !== undefined) {
    own.set('tracking_total_keys', ctx.trackedKeys.keyCount);
    own.set('tracking_total_items', ctx.trackedKeys.itemCount);
  }
  const m = ctx.metrics;
  if (m === undefined) return own;
  const sum = async (metric: { get(): Promise<{ values: Array<{ value: number }> }> }) =>
    (await metric.get()).values.reduce((a, v) => a + v.value, 0);
  own.set('total_connections_received', await sum(m.raw.client_connections_accepted_total));
  own.set('total_commands_processed', await sum(m.raw.commands_total));
  own.set('rejected_connections', await sum(m.raw.client_connections_rejected_total));
  return own;
}

/** Valkey's run_id: random per process. */
const runId = onFirstUse(() => nodeCrypto().randomBytes(20).toString('hex'));
const PROCESS_STARTED = Date.now() - Math.round(process.uptime() * 1000);

function field(section: InfoSection | undefined, name: string): string | undefined {
  const prefix = `${name}:`;
  return section?.lines.find((l) => l.startsWith(prefix))?.slice(prefix.length);
}

/** `# Server` as Valkey 8.0 prints it, about respool's process; versions are the upstream's. */
function serverSection(session: HandlerSession, upstream: InfoSection | undefined): InfoSection {
  const ctx = session.ctx;
  const facts = ctx.facts;
  const now = Date.now();
  const uptime = Math.floor((now - (facts?.startedAt ?? PROCESS_STARTED)) / 1000);
  const local = session.localAddress;
  const port = local.slice(local.lastIndexOf(':') + 1);
  const version = ctx.serverVersion();
  const mux = process.platform === 'linux' ? 'epoll' : process.platform === 'win32' ? 'iocp' : 'kqueue';
  return {
    header: HEADERS.server,
    lines: [
      `redis_version:${field(upstream, 'redis_version') ?? version}`,
      // Valkey's own lines: Redis has neither, and respool in front of Redis must not claim Valkey.
      ...(ctx.serverName() === 'redis'
        ? []
        : [`server_name:${field(upstream, 'server_name') ?? 'valkey'}`, `valkey_version:${field(upstream, 'valkey_version') ?? version}`]),
      'redis_git_sha1:00000000',
      'redis_git_dirty:0',
      'redis_build_id:0',
      // respool is one endpoint; the upstream's mode is upstream_mode. Named as the node names it
      // (redis_mode under extended-redis-compatibility, or from Redis).
      `${field(upstream, 'redis_mode') !== undefined ? 'redis_mode' : 'server_mode'}:standalone`,
      `os:${os.type()} ${os.release()} ${os.machine()}`,
      `arch_bits:${process.arch.includes('64') ? 64 : 32}`,
      'monotonic_clock:POSIX clock_gettime',
      `multiplexing_api:${mux}`,
      'gcc_version:0.0.0',
      `process_id:${process.pid}`,
      'process_supervised:no',
      `run_id:${runId()}`,
      `tcp_port:${port}`,
      `server_time_usec:${now * 1000}`,
      `uptime_in_seconds:${uptime}`,
      `uptime_in_days:${Math.floor(uptime / 86400)}`,
      'hz:0',
      'configured_hz:0',
      `lru_clock:${Math.floor(now / 1000) & 0xffffff}`,
      `executable:${process.argv[1] ?? process.execPath}`,
      `config_file:${facts?.configFile ?? ''}`,
      'io_threads_active:0',
      `availability_zone:${facts?.zone() ?? ''}`,
      ...(ctx.config.listen === null ? [] : [`listener0:name=tcp,bind=${ctx.config.listen.host},port=${port}`]),
      ...(ctx.config.unixSocket === null ? [] : [`listener${ctx.config.listen === null ? 0 : 1}:name=unix,bind=${ctx.config.unixSocket}`]),
      `respool_version:${RESPOOL_VERSION}`,
      `nodejs_version:${process.versions.node}`,
      `upstream_mode:${ctx.isCluster() ? 'cluster' : 'standalone'}`,
    ],
  };
}

/** `# Respool`: the proxy's own state (links, leases, subscriber connections, topology, hot keys). */
function respoolSection(ctx: ServerContext, unanswered: number): InfoSection {
  const topology = ctx.router.topology();
  const facts = ctx.facts;
  const links = facts?.linksByNode() ?? {};
  const leases = ctx.dedicated.stats();
  const hub = ctx.pubsub.stats();
  const nodes = topology?.allNodes() ?? [];
  let inUse = 0;
  let idle = 0;
  let waiting = 0;
  for (const s of Object.values(leases.byNode)) {
    inUse += s.inUse;
    idle += s.idle;
    waiting += s.waiting;
  }
  let circuitsOpen = 0;
  const nodeLines = nodes.map((n, i) => {
    const circuit = facts?.circuitState(n.address) ?? 'closed';
    if (circuit !== 'closed') circuitsOpen++;
    const lease = leases.byNode[n.address];
    return `node${i}:address=${n.address},role=${n.role},links=${links[n.address] ?? 0},leased_in_use=${lease?.inUse ?? 0},leased_idle=${lease?.idle ?? 0},circuit=${circuit}`;
  });
  return {
    header: HEADERS.respool,
    lines: [
      `respool_version:${RESPOOL_VERSION}`,
      `upstream_mode:${topology?.mode ?? 'unknown'}`,
      `topology_epoch:${facts?.topologyEpoch() ?? 0}`,
      `upstream_primaries:${topology?.shards.length ?? 0}`,
      `upstream_nodes:${nodes.length}`,
      `slots_covered:${topology?.coveredSlots() ?? 0}`,
      `shared_links:${Object.values(links).reduce((a, b) => a + b, 0)}`,
      `leased_connections_in_use:${inUse}`,
      `leased_connections_idle:${idle}`,
      `leased_connections_total:${leases.total}`,
      `lease_waiters:${waiting}`,
      `pubsub_upstream_connections:${hub.upstreamConnections}`,
      `pubsub_subscribers:${hub.subscribers}`,
      `circuits_open:${circuitsOpen}`,
      `hot_key_split_rules:${ctx.hotKeys.rules().length}`,
      `hot_key_split_keys:${ctx.hotKeys.splitKeys().length}`,
      `info_primaries_unanswered:${unanswered}`,
      ...nodeLines,
    ],
  };
}
