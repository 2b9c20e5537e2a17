import { nodeCrypto } from '../util/lazy-builtins.js';
import type { HostPort, RespoolConfig } from '../config/types.js';
import { divideSlots, type SlotRun } from './slot-division.js';

/**
 * The cluster respool shows its clients (CLUSTER SLOTS / SHARDS / NODES / INFO / MYID …,
 * answered by handlers/cluster.ts): respool itself — or each member of a respool fleet
 * (cluster.peers, cluster.peersFrom: src/fleet/membership.ts) — is a primary without replicas at
 * its announce address, so a cluster-aware client keeps all its traffic on respool. The slots
 * are divided among the live members by one deterministic rule (fleet/slot-division.ts:
 * rendezvous hashing of slot ranges over member ids), so instances that see the same live
 * members show the same picture, and a member that fails loses only its own slots. The division
 * only spreads clients over the fleet; each instance still serves every slot (it routes by the
 * upstream's real topology), so no instance ever answers MOVED, and two instances that see
 * different members cost a client extra hops at most.
 */
export interface EmulatedNode {
  /** 40 hex characters, stable: derived from the announce address. */
  readonly id: string;
  readonly shardId: string;
  readonly host: string;
  readonly port: number;
  /** "host:port" ("[::1]:6380" for IPv6). */
  readonly address: string;
  /** Inclusive slot runs in slot order; empty for a member that is down or still joining. */
  readonly slots: readonly SlotRun[];
  /** Its config epoch: its place among the members sorted by id, from 1. */
  readonly epoch: number;
  readonly myself: boolean;
  /** How it is doing: alive and suspect members have slots (suspect shows as fail? in CLUSTER NODES). */
  readonly state: 'alive' | 'suspect' | 'joining' | 'fail';
  /** When it last answered a check (ms since the epoch; 0 when never): CLUSTER NODES' pong-recv. */
  readonly lastSeenAt: number;
}

/** One member as the picture needs it. */
export interface EmulationMember {
  readonly host: string;
  readonly port: number;
  readonly state: EmulatedNode['state'];
  readonly self: boolean;
  readonly lastSeenAt?: number | null;
}

export class ClusterEmulation {
  /** Every member, ordered by its first slot (members without slots last, by address). */
  readonly nodes: readonly EmulatedNode[];
  readonly self: EmulatedNode;

  constructor(members: readonly EmulationMember[]) {
    const withIds = members.map((m) => ({ ...m, id: nodeId(m), address: addressOf(m) }));
    const live = withIds.filter((m) => m.self || m.state === 'alive' || m.state === 'suspect').map((m) => m.id);
    const division = divideSlots(live);
    const byId = [...withIds].sort((a, b) => (a.id < b.id ? -1 : 1));
    const nodes = withIds.map((m) => ({
      id: m.id,
      shardId: sha1Hex(`respool-shard:${m.address}`),
      host: m.host,
      port: m.port,
      address: m.address,
      slots: division.get(m.id) ?? [],
      epoch: byId.indexOf(m) + 1,
      myself: m.self,
      state: m.self ? 'alive' as const : m.state,
      lastSeenAt: m.lastSeenAt ?? 0,
    }));
    nodes.sort((a, b) => {
      const sa = a.slots[0]?.[0] ?? Infinity;
      const sb = b.slots[0]?.[0] ?? Infinity;
      return sa !== sb ? sa - sb : a.address < b.address ? -1 : 1;
    });
    this.nodes = nodes;
    this.self = nodes.find((x) => x.myself)!;
  }

  /** A picture of respool and its static peers, before any check (every peer counted as alive). */
  static ofPeers(announce: HostPort, peers: readonly HostPort[]): ClusterEmulation {
    const own = addressOf(announce);
    const members: EmulationMember[] = [{ ...announce, state: 'alive', self: true }];
    const seen = new Set([own]);
    for (const p of peers) {
      if (seen.has(addressOf(p))) continue; // its own address, or twice
      seen.add(addressOf(p));
      members.push({ ...p, state: 'alive', self: false });
    }
    return new ClusterEmulation(members);
  }

  /** The instance with this node id (CLUSTER REPLICAS), if any. */
  byId(id: string): EmulatedNode | undefined {
    return this.nodes.find((x) => x.id === id);
  }

  /** Every slot run with its owner, in slot order (CLUSTER SLOTS). */
  slotRuns(): Array<{ run: SlotRun; node: EmulatedNode }> {
    const out: Array<{ run: SlotRun; node: EmulatedNode }> = [];
    for (const node of this.nodes) for (const run of node.slots) out.push({ run, node });
    return out.sort((a, b) => a.run[0] - b.run[0]);
  }
}

/** The stable node id of the instance announcing `hp` (the same on every instance of a fleet). */
export function nodeId(hp: HostPort): string {
  return sha1Hex(`respool:${addressOf(hp)}`);
}

/**
 * The address respool announces: cluster.announce, else the listen host and the port it is bound
 * to (listen.port may be 0), with 127.0.0.1 for a wildcard listen host (0.0.0.0, ::).
 */
export function announceAddress(config: Pick<RespoolConfig, 'cluster' | 'listen'>, boundPort: number): HostPort {
  if (config.cluster.announce !== null) return config.cluster.announce;
  const host = config.listen?.host ?? '127.0.0.1'; // a Unix socket only: announce loopback (cluster.announce to say otherwise)
  return { host: host === '0.0.0.0' || host === '::' || host === '' ? '127.0.0.1' : host, port: boundPort };
}

/** "host:port", "[::1]:6380" for an IPv6 host. */
export function addressOf(hp: HostPort): string {
  return hp.host.includes(':') ? `[${hp.host}]:${hp.port}` : `${hp.host}:${hp.port}`;
}

function sha1Hex(text: string): string {
  return nodeCrypto().createHash('sha1').update(text).digest('hex');
}
