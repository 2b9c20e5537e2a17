import { decodeReply, RespError, type RespValue } from '../resp/decode.js';
import type { UpstreamPools } from '../upstream/upstream-pools.js';
import { Topology, type ClusterNode, type Shard } from './topology.js';

export type UpstreamMode = 'auto' | 'cluster' | 'standalone';

/** How long discovery waits for a node's INFO (zone, offset) before keeping what it had. */
const ZONE_LOOKUP_TIMEOUT_MS = 1_000;

/** Asks one seed for the topology; throws with the seed's error when it cannot tell. */
export async function discoverFrom(
  seed: { host: string; port: number },
  mode: UpstreamMode,
  pools: UpstreamPools,
): Promise<Topology> {
  const pool = pools.get(seed.host, seed.port, 2, 'primary');
  let topology: Topology;
  if (mode === 'standalone' || (mode === 'auto' && !(await clusterEnabled(pool.call(['INFO', 'cluster']))))) {
    topology = Topology.standalone(seed.host, seed.port);
  } else {
    topology = await readClusterTopology(seed, (args) => pool.call(args), pools.usesTls);
  }
  return withZones(topology, pools);
}

async function clusterEnabled(reply: Promise<Buffer>): Promise<boolean> {
  const value = decodeReply(await reply);
  if (value instanceof RespError) throw new Error(value.message);
  return /^cluster_enabled:1\s*$/m.test(text(value));
}

async function readClusterTopology(
  seed: { host: string; port: number },
  call: (args: string[]) => Promise<Buffer>,
  useTls = false,
): Promise<Topology> {
  const shards = decodeReply(await call(['CLUSTER', 'SHARDS']));
  if (!(shards instanceof RespError)) return fromClusterShards(shards, seed, useTls);
  if (!/unknown (sub)?command/i.test(shards.message)) throw new Error(shards.message);
  // Servers before Redis 7. Valkey and Redis answer a TLS connection with the TLS ports here
  // (cluster.c shouldReturnTlsInfo), so the ports fit the links whichever way they are opened.
  const slots = decodeReply(await call(['CLUSTER', 'SLOTS']));
  if (slots instanceof RespError) throw new Error(slots.message);
  return fromClusterSlots(slots, seed);
}

/**
 * CLUSTER SHARDS: [{slots: [s, e, …], nodes: [{id, ip, endpoint, port, tls-port, role, health, …}]}].
 * Each node lists `port` (plaintext, absent when 0) and `tls-port` (absent when 0) whatever the
 * connection (Valkey 8.0 cluster_legacy.c addNodeDetailsToShardReply): with `useTls` respool
 * takes `tls-port`, else `port`, never the other, so no plaintext reaches a TLS port. A node
 * without the port respool needs is left out; a shard whose primary lacks it is an error.
 */
export function fromClusterShards(reply: RespValue, seed: { host: string }, useTls = false): Topology {
  const shards: Shard[] = [];
  for (const entry of asArray(reply)) {
    const shard = asRecord(entry);
    const bounds = asArray(shard['slots'] ?? []).map(num);
    const all = asArray(shard['nodes'] ?? []).map((n) => nodeFromShardEntry(asRecord(n), seed.host, useTls));
    const nodes = all.filter((n) => n.port > 0);
    const portless = all.find((n) => n.port === 0 && n.role === 'primary' && n.health !== 'failed');
    if (portless !== undefined && bounds.length > 0 && !nodes.some((n) => n.role === 'primary' && n.health !== 'failed')) {
      throw new Error(`CLUSTER SHARDS: primary ${portless.id} (${portless.host}) has no ${useTls ? 'tls-port (upstreamTls is on: start the nodes with --tls-port)' : 'plaintext port (it listens on TLS only: turn on upstreamTls)'}`);
    }
    // After a failover the dead old primary can still be listed as "master" (health "failed")
    // next to the promoted one: the serving primary is the healthy one.
    const primaries = nodes.filter((n) => n.role === 'primary');
    const primary = primaries.find((n) => n.health === 'online') ?? primaries.find((n) => n.health !== 'failed') ?? primaries[0];
    if (!primary || bounds.length === 0) continue; // a shard without slots serves nothing yet
    const slots: Array<[number, number]> = [];
    for (let i = 0; i + 1 < bounds.length; i += 2) slots.push([bounds[i]!, bounds[i + 1]!]);
    shards.push({ primary, replicas: nodes.filter((n) => n !== primary && n.role === 'replica'), slots });
  }
  if (shards.length === 0) throw new Error('CLUSTER SHARDS listed no shard with slots');
  return new Topology('cluster', shards, 'CLUSTER SHARDS');
}

function nodeFromShardEntry(n: Record<string, RespValue>, seedHost: string, useTls: boolean): ClusterNode {
  const endpoint = text(n['endpoint'] ?? '');
  const ip = text(n['ip'] ?? '');
  // "?" means the node does not know its own address; a seed's host is the best guess then.
  const host = endpoint && endpoint !== '?' ? endpoint : ip && ip !== '?' ? ip : seedHost;
  const port = num((useTls ? n['tls-port'] : n['port']) ?? 0);
  const zone = n['availability-zone'] !== undefined ? text(n['availability-zone']) || null : null;
  return {
    id: text(n['id'] ?? `${host}:${port}`),
    host,
    port,
    address: `${host}:${port}`,
    role: text(n['role'] ?? '') === 'master' ? 'primary' : 'replica',
    health: text(n['health'] ?? 'online'),
    zone,
    replicationOffset: num(n['replication-offset'] ?? 0),
  };
}

/** CLUSTER SLOTS: [[start, end, [ip, port, id, …], [replica ip, port, id, …]…]…]. */
export function fromClusterSlots(reply: RespValue, seed: { host: string }): Topology {
  const byPrimary = new Map<string, Shard>();
  for (const entry of asArray(reply)) {
    const row = asArray(entry);
    const [start, end] = [num(row[0]!), num(row[1]!)];
    const [primary, ...replicas] = row.slice(2).map((n, i) => nodeFromSlotsEntry(asArray(n), i === 0, seed.host));
    if (!primary) continue;
    let shard = byPrimary.get(primary.address);
    if (!shard) {
      shard = { primary, replicas, slots: [] };
      byPrimary.set(primary.address, shard);
    }
    shard.slots.push([start, end]);
  }
  if (byPrimary.size === 0) throw new Error('CLUSTER SLOTS listed no slot');
  return new Topology('cluster', [...byPrimary.values()], 'CLUSTER SLOTS');
}

function nodeFromSlotsEntry(n: RespValue[], isPrimary: boolean, seedHost: string): ClusterNode {
  const ip = text(n[0] ?? '');
  const host = ip && ip !== '?' ? ip : seedHost;
  const port = num(n[1] ?? 0);
  return {
    id: text(n[2] ?? `${host}:${port}`), host, port, address: `${host}:${port}`,
    role: isPrimary ? 'primary' : 'replica', health: 'online', zone: null, replicationOffset: 0,
  };
}

/**
 * Fills in what CLUSTER SHARDS may lack, from one `INFO server replication persistence` per node (in
 * parallel): the server's version and name, the zone from `availability_zone` (Valkey 8.0+) where CLUSTER SHARDS gave none
 * (it does from 9.1), and the replication offset from `master_repl_offset` (fresher than the
 * gossiped `replication-offset`; read strategies compare a replica's with its primary's for
 * reads.maxReplicaLagBytes), and a replica's health from its own view (loading / syncing /
 * link up). A node that does not answer in time keeps what it had.
 */
async function withZones(topology: Topology, pools: UpstreamPools): Promise<Topology> {
  const lookups = topology.allNodes().map(async (node) => {
    const pool = pools.get(node.host, node.port, 2, node.role);
    const reply = await Promise.race([
      pool.call(['INFO', 'server', 'replication', 'persistence']).catch(() => null),
      new Promise<null>((resolve) => setTimeout(() => resolve(null), ZONE_LOOKUP_TIMEOUT_MS).unref()),
    ]);
    if (reply === null) return;
    const value = decodeReply(reply);
    if (value instanceof RespError) return;
    const info = text(value);
    if (node.zone === null) {
      const match = /^availability_zone:(.*?)\s*$/m.exec(info);
      node.zone = match && match[1] ? match[1] : null;
    }
    // Valkey prints redis_version first (7.2.4, for clients that check it) and reports its own
    // valkey_version in HELLO; Redis has only redis_version.
    const version = /^valkey_version:(\S+)/m.exec(info) ?? /^redis_version:(\S+)/m.exec(info);
    if (version) {
      node.version = version[1]!;
      node.serverName = /^server_name:(\S+)/m.exec(info)?.[1] ?? 'redis';
    }
    const runId = /^run_id:(\S+)/m.exec(info);
    if (runId) node.runId = runId[1]!;
    const offset = /^master_repl_offset:(\d+)/m.exec(info);
    if (offset) node.replicationOffset = Number(offset[1]);
    if (node.role === 'replica' && node.health !== 'failed' && node.health !== 'fail') {
      // CLUSTER SHARDS calls every replica with a gossiped offset of 0 "loading", which is
      // also every replica of a shard that has not been written to yet. The replica's own
      // INFO tells: loading (or still syncing) means loading, a live link means online.
      if (/^loading:1/m.test(info) || /^master_sync_in_progress:1/m.test(info)) node.health = 'loading';
      else if (/^master_link_status:up/m.test(info)) node.health = 'online';
    }
  });
  await Promise.all(lookups);
  return topology;
}

// Decoded replies differ by protocol: RESP2 sends maps as flat arrays, RESP3 as Map.
function asArray(value: RespValue): RespValue[] {
  if (Array.isArray(value)) return value;
  throw new Error(`unexpected reply shape: expected an array, got ${typeof value}`);
}

function asRecord(value: RespValue): Record<string, RespValue> {
  const out: Record<string, RespValue> = {};
  if (value instanceof Map) {
    for (const [k, v] of value) out[text(k)] = v;
  } else {
    const flat = asArray(value);
    for (let i = 0; i + 1 < flat.length; i += 2) out[text(flat[i]!)] = flat[i + 1]!;
  }
  return out;
}

function text(value: RespValue): string {
  if (typeof value === 'string') return value;
  if (Buffer.isBuffer(value)) return value.toString('utf8');
  if (typeof value === 'number') return String(value);
  return '';
}

function num(value: RespValue): number {
  return typeof value === 'number' ? value : Number(text(value));
}
