import calculateSlot from 'cluster-key-slot';
import { SLOT_COUNT } from '../cluster/topology.js';
import type { ClusterEmulation, EmulatedNode } from '../fleet/cluster-emulation.js';
import { encodeArray, encodeBulk, encodeError, encodeInteger, encodeMap, encodeVerbatim } from '../resp/encode.js';
import { ProxyError } from '../errors.js';
import { wrongArity } from '../commands/command-table.js';
import { UpstreamCall } from '../routing/upstream-call.js';
import type { Handler, HandlerSession } from '../client/handler-session.js';

/**
 * Cluster emulation (the `cluster` family, config cluster.announce / cluster.peers / peersFrom):
 * respool answers the CLUSTER commands a cluster-aware client asks with its own picture
 * (fleet/cluster-emulation.ts) — respool, or each live member of its fleet, as a primary owning slot
 * runs at its announce address — in Valkey 8.0.1's formats (cluster.c, cluster_legacy.c),
 * so the client keeps all its traffic on respool, whether the upstream is a cluster or a
 * standalone server. CLUSTER COUNTKEYSINSLOT / GETKEYSINSLOT go to the slot's real owner.
 * Cluster administration (MEET, ADDSLOTS, SETSLOT, FAILOVER, …) is refused (proxy-handling.ts).
 */
export const cluster: Handler = (session, req) => {
  const { command, args } = req;
  if (command !== 'cluster|countkeysinslot' && command !== 'cluster|getkeysinslot') {
    session.replyNow(clusterReply(session, command, args));
    return;
  }
  const checked = checkSlotArgs(command, args);
  if (typeof checked !== 'number') return session.replyNow(checked);
  const ctx = session.ctx;
  if (!ctx.isCluster()) {
    return session.replyNow(encodeError(ProxyError.refused(command, 'the upstream is a standalone server, which keeps no keys by slot')));
  }
  // The slot's real owner counts or lists its keys (followed through MOVED like any keyed call).
  const entry = session.reserve();
  ctx.metrics?.commandCounter(command).inc();
  ctx.router.send({ to: 'call', call: new UpstreamCall(entry, ctx.router, req.raw, command, checked) });
};

/** The emulated subcommands respool answers itself (also at EXEC inside MULTI). */
export const LOCAL_CLUSTER_COMMANDS: ReadonlySet<string> = new Set([
  'cluster|slots', 'cluster|shards', 'cluster|nodes', 'cluster|info', 'cluster|myid', 'cluster|myshardid',
  'cluster|keyslot', 'cluster|links', 'cluster|replicas', 'cluster|slaves',
]);

/** The reply to an emulated CLUSTER subcommand answered locally (not COUNTKEYSINSLOT/GETKEYSINSLOT). */
export function clusterReply(session: HandlerSession, command: string, args: Buffer[]): Buffer {
  const view = session.ctx.clusterView();
  const proto = session.state.protocol;
  switch (command) {
    case 'cluster|slots':
      return slotsReply(view, proto);
    case 'cluster|shards':
      return shardsReply(view, proto);
    case 'cluster|nodes':
      return encodeVerbatim(nodesText(view), proto);
    case 'cluster|info':
      return encodeVerbatim(infoText(view, session.ctx.router.topology()?.coveredSlots() ?? 0), proto);
    case 'cluster|myid':
      return encodeBulk(view.self.id, proto);
    case 'cluster|myshardid':
      return encodeBulk(view.self.shardId, proto);
    case 'cluster|keyslot':
      return encodeInteger(calculateSlot(args[2]!));
    case 'cluster|links':
      return encodeArray([]); // respool has no cluster bus
    case 'cluster|replicas':
    case 'cluster|slaves': {
      const id = args[2]!.toString('utf8');
      // Every instance is a primary without replicas.
      return view.byId(id) === undefined ? encodeError(`ERR Unknown node ${id}`) : encodeArray([]);
    }
    default:
      return encodeError(ProxyError.notLocal(command));
  }
}

/** CLUSTER COUNTKEYSINSLOT slot / GETKEYSINSLOT slot count, checked as Valkey does: the slot, or the error reply. */
function checkSlotArgs(command: string, args: Buffer[]): number | Buffer {
  const count = command === 'cluster|getkeysinslot';
  const slot = parseLongLong(args[2]!);
  if (slot === null) return encodeError(ProxyError.notAnInteger());
  if (!count) return slot < 0 || slot >= SLOT_COUNT ? encodeError('ERR Invalid slot') : slot;
  const max = parseLongLong(args[3]!);
  if (max === null) return encodeError(ProxyError.notAnInteger());
  if (slot < 0 || slot >= SLOT_COUNT || max < 0) return encodeError('ERR Invalid slot or number of keys');
  return slot;
}

/** Valkey's string2ll: an optional "-", no leading zeros, within a signed 64-bit integer. */
function parseLongLong(b: Buffer): number | null {
  const s = b.toString('latin1');
  if (!/^(0|-?[1-9][0-9]{0,18})$/.test(s)) return null;
  const v = BigInt(s);
  if (v > 9223372036854775807n || v < -9223372036854775808n) return null;
  return Number(v);
}

/** One node in CLUSTER SLOTS: [ip, port, id, {}] (the map holds hostname when one is set: never here). */
function slotsNode(node: EmulatedNode, proto: 2 | 3): Buffer {
  return encodeArray([encodeBulk(node.host, proto), encodeInteger(node.port), encodeBulk(node.id, proto), encodeMap([], proto)]);
}

/** CLUSTER SLOTS: one [start, end, primary] per slot run, in slot order (no replicas). */
function slotsReply(view: ClusterEmulation, proto: 2 | 3): Buffer {
  return encodeArray(view.slotRuns().map(({ run, node }) => encodeArray([encodeInteger(run[0]), encodeInteger(run[1]), slotsNode(node, proto)])));
}

/**
 * CLUSTER SHARDS: { slots: [start, end, start, end, …], nodes: [{ id, port, ip, endpoint, role,
 * replication-offset, health }] } per member; a member that is down (or still joining) is a
 * shard without slots, health "fail" when down.
 */
function shardsReply(view: ClusterEmulation, proto: 2 | 3): Buffer {
  const s = (v: string) => encodeBulk(v, proto);
  return encodeArray(view.nodes.map((n) => encodeMap([
    [s('slots'), encodeArray(n.slots.flatMap(([start, end]) => [encodeInteger(start), encodeInteger(end)]))],
    [s('nodes'), encodeArray([encodeMap([
      [s('id'), s(n.id)],
      [s('port'), encodeInteger(n.port)],
      [s('ip'), s(n.host)],
      [s('endpoint'), s(n.host)],
      [s('role'), s('master')],
      [s('replication-offset'), encodeInteger(0)],
      [s('health'), s(n.state === 'fail' ? 'fail' : 'online')],
    ], proto)])],
  ], proto)));
}

/**
 * CLUSTER NODES (clusterGenNodeDescription): "<id> <ip>:<port>@<cport> <flags> <primary> <ping-sent>
 * <pong-recv> <config-epoch> <link-state> <slot> <slot> …", one line per member. respool has no
 * cluster bus: cport is 0. A member that missed a check is `fail?` (it keeps its slots until
 * cluster.peerDownAfterMs), one that is down `fail` and `disconnected`, with no slots.
 */
function nodesText(view: ClusterEmulation): string {
  let text = '';
  for (const n of view.nodes) {
    const flags = `${n.myself ? 'myself,' : ''}master${n.state === 'suspect' ? ',fail?' : n.state === 'fail' ? ',fail' : ''}`;
    const link = n.state === 'fail' ? 'disconnected' : 'connected';
    const slots = n.slots.map(([start, end]) => (start === end ? ` ${start}` : ` ${start}-${end}`)).join('');
    text += `${n.id} ${n.host}:${n.port}@0 ${flags} - 0 ${n.myself ? 0 : n.lastSeenAt} ${n.epoch} ${link}${slots}\n`;
  }
  return text;
}

/**
 * CLUSTER INFO (genClusterInfoString): ok while respool's upstream topology covers every slot
 * (a fleet always has one live member: this one). Slots of a member that missed a check count as
 * pfail; a member that is down has none.
 */
function infoText(view: ClusterEmulation, covered: number): string {
  const ok = covered >= SLOT_COUNT;
  let pfail = 0;
  let size = 0;
  for (const n of view.nodes) {
    if (n.slots.length > 0) size++;
    if (n.state === 'suspect') for (const [s, e] of n.slots) pfail += e - s + 1;
  }
  return (
    `cluster_state:${ok ? 'ok' : 'fail'}\r\n` +
    `cluster_slots_assigned:${SLOT_COUNT}\r\n` +
    `cluster_slots_ok:${ok ? SLOT_COUNT - pfail : covered}\r\n` +
    `cluster_slots_pfail:${ok ? pfail : 0}\r\n` +
    `cluster_slots_fail:${ok ? 0 : SLOT_COUNT - covered}\r\n` +
    `cluster_known_nodes:${view.nodes.length}\r\n` +
    `cluster_size:${size}\r\n` +
    `cluster_current_epoch:${view.nodes.length}\r\n` +
    `cluster_my_epoch:${view.self.epoch}\r\n` +
    'cluster_stats_messages_sent:0\r\n' +
    'cluster_stats_messages_received:0\r\n' +
    'total_cluster_links_buffer_limit_exceeded:0\r\n'
  );
}
