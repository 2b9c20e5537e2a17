import { createHash } from 'node:crypto';
import type { HostPort, RespoolConfig } from '../config/types.js';
import { SLOT_COUNT } from './topology.js';

/**
 * The cluster respool shows its clients (CLUSTER SLOTS / SHARDS / NODES / INFO / MYID …,
 * answered by handlers/cluster.ts): respool itself — or each instance of a respool fleet
 * (config cluster.peers) — is a primary without replicas at its announce address, so a
 * cluster-aware client keeps all its traffic on respool. With peers, the 16384 slots are divided
 * evenly among all instances sorted by address: every instance computes the same split. The
 * split only spreads clients over the fleet; each instance still serves every slot (it routes
 * by the upstream's real topology), so no instance ever answers MOVED.
 */
export interface EmulatedNode {
  /** 40 hex characters, stable: derived from the announce address. */
  readonly id: string;
  readonly shardId: string;
  readonly host: string;
  readonly port: number;
  /** "host:port" ("[::1]:6380" for IPv6). */
  readonly address: string;
  /** Inclusive [start, end]; every instance owns one range. */
  readonly slots: readonly [number, number];
  /** Its config epoch: its place in the sorted fleet, from 1. */
  readonly epoch: number;
  readonly myself: boolean;
}

export class ClusterEmulation {
  /** Every instance, ordered by address (= by slot range). */
  readonly nodes: readonly EmulatedNode[];
  readonly self: EmulatedNode;

  constructor(announce: HostPort, peers: readonly HostPort[]) {
    const own = addressOf(announce);
    const all = new Map<string, HostPort>([[own, announce]]);
    for (const p of peers) if (!all.has(addressOf(p))) all.set(addressOf(p), p); // its own address is ignored
    const sorted = [...all.values()].sort(compareHostPort);
    const n = sorted.length;
    this.nodes = sorted.map((hp, i) => {
      const address = addressOf(hp);
      return {
        id: nodeId(hp),
        shardId: sha1Hex(`respool-shard:${address}`),
        host: hp.host,
        port: hp.port,
        address,
        slots: [Math.floor((i * SLOT_COUNT) / n), Math.floor(((i + 1) * SLOT_COUNT) / n) - 1] as const,
        epoch: i + 1,
        myself: address === own,
      };
    });
    this.self = this.nodes.find((x) => x.myself)!;
  }

  /** The instance with this node id (CLUSTER REPLICAS), if any. */
  byId(id: string): EmulatedNode | undefined {
    return this.nodes.find((x) => x.id === id);
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
  const host = config.listen.host;
  return { host: host === '0.0.0.0' || host === '::' || host === '' ? '127.0.0.1' : host, port: boundPort };
}

function addressOf(hp: HostPort): string {
  return hp.host.includes(':') ? `[${hp.host}]:${hp.port}` : `${hp.host}:${hp.port}`;
}

function compareHostPort(a: HostPort, b: HostPort): number {
  if (a.host !== b.host) return a.host < b.host ? -1 : 1;
  return a.port - b.port;
}

function sha1Hex(text: string): string {
  return createHash('sha1').update(text).digest('hex');
}
