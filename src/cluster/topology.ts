export const SLOT_COUNT = 16384;

export interface ClusterNode {
  /** Cluster node id; "host:port" for a standalone server or a node known only from MOVED. */
  id: string;
  host: string;
  port: number;
  /** "host:port", the key of its pools and metrics. */
  address: string;
  role: 'primary' | 'replica';
  /** From CLUSTER SHARDS: online | failed | loading; "online" when not reported. */
  health: string;
  /** availability-zone from CLUSTER SHARDS (9.1+), else availability_zone from INFO server (8.0+); null when none. */
  zone: string | null;
  /** Replication offset (INFO replication master_repl_offset, else CLUSTER SHARDS), 0 when unknown. */
  replicationOffset: number;
  /** The server's version from INFO server, as its HELLO reports it (valkey_version, else Redis' redis_version), when it answered. */
  version?: string;
  /** INFO server's server_name ("valkey"); "redis" when it answered without one (Redis has none). */
  serverName?: string;
  /** INFO server's run_id, when it answered: a new one means the process restarted (its ACL users may be gone). */
  runId?: string;
}

export interface Shard {
  primary: ClusterNode;
  replicas: ClusterNode[];
  /** Inclusive slot ranges [start, end]. */
  slots: Array<[number, number]>;
}

/**
 * An immutable picture of the upstream: which shard owns each slot, and each shard's nodes.
 * Routing reads the current snapshot; discovery builds a new one and swaps it in whole, so a
 * request never sees half an update. MOVED makes a copy with one slot changed
 * (withSlotOwner), never an in-place edit.
 */
export class Topology {
  /** slotOwner[slot] = index into shards, or -1 when no shard serves the slot. */
  private readonly slotOwner: Int16Array;

  constructor(
    readonly mode: 'cluster' | 'standalone',
    readonly shards: readonly Shard[],
    readonly source: string,
    slotOwner?: Int16Array,
  ) {
    if (slotOwner) {
      this.slotOwner = slotOwner;
    } else {
      this.slotOwner = new Int16Array(SLOT_COUNT).fill(-1);
      shards.forEach((shard, index) => {
        for (const [start, end] of shard.slots) this.slotOwner.fill(index, start, end + 1);
      });
    }
  }

  static standalone(host: string, port: number, zone: string | null = null): Topology {
    const node: ClusterNode = {
      id: `${host}:${port}`, host, port, address: `${host}:${port}`, role: 'primary',
      health: 'online', zone, replicationOffset: 0,
    };
    return new Topology('standalone', [{ primary: node, replicas: [], slots: [[0, SLOT_COUNT - 1]] }], 'standalone');
  }

  /** The primary that owns `slot`, or undefined when the slot is not served. */
  primaryForSlot(slot: number): ClusterNode | undefined {
    const owner = this.slotOwner[slot]!;
    return owner < 0 ? undefined : this.shards[owner]!.primary;
  }

  shardForSlot(slot: number): Shard | undefined {
    const owner = this.slotOwner[slot]!;
    return owner < 0 ? undefined : this.shards[owner];
  }

  coveredSlots(): number {
    let n = 0;
    for (let i = 0; i < SLOT_COUNT; i++) if (this.slotOwner[i]! >= 0) n++;
    return n;
  }

  allNodes(): ClusterNode[] {
    return this.shards.flatMap((s) => [s.primary, ...s.replicas]);
  }

  primaries(): ClusterNode[] {
    return this.shards.map((s) => s.primary);
  }

  /**
   * A copy in which `slot` belongs to the primary at host:port (after a MOVED reply). A node
   * not in the picture yet becomes a new shard with just that slot, until the next refresh.
   */
  withSlotOwner(slot: number, host: string, port: number): Topology {
    const address = `${host}:${port}`;
    const current = this.primaryForSlot(slot);
    if (current?.address === address) return this;
    const owner = new Int16Array(this.slotOwner);
    let index = this.shards.findIndex((s) => s.primary.address === address);
    let shards = this.shards;
    if (index < 0) {
      const node: ClusterNode = {
        id: address, host, port, address, role: 'primary', health: 'online', zone: null, replicationOffset: 0,
      };
      shards = [...this.shards, { primary: node, replicas: [], slots: [] }];
      index = shards.length - 1;
    }
    owner[slot] = index;
    return new Topology(this.mode, shards, `${this.source}+moved`, owner);
  }

  toJSON(): unknown {
    return {
      mode: this.mode,
      source: this.source,
      coveredSlots: this.coveredSlots(),
      shards: this.shards.map((s) => ({
        slots: s.slots,
        primary: s.primary,
        replicas: s.replicas,
      })),
    };
  }
}
