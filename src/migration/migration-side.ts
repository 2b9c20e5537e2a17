import calculateSlot from 'cluster-key-slot';
import type { Logger } from 'pino';
import type { RespoolConfig, UpstreamTlsConfig } from '../config/types.js';
import type { UpstreamMode } from '../cluster/discovery.js';
import type { ClusterNode, Topology } from '../cluster/topology.js';
import { TopologyRefresher } from '../cluster/topology-refresher.js';
import { UpstreamPools } from '../upstream/upstream-pools.js';
import { decodeReply, RespError, type RespValue } from '../resp/decode.js';

/** Which of a process's own credentials sign in at a side (sign-ins.ts). */
export type SignIn = 'upstreams' | 'migration';

/** Where one side of a migration is: what one process tells another (no credentials: sign-ins.ts). */
export interface SidePlace {
  seeds: Array<{ host: string; port: number }>;
  mode: UpstreamMode;
  signIn: SignIn;
}

/** Where one side of a migration is and how this process signs in there. */
export interface SideAddress extends SidePlace {
  upstreamAuth: RespoolConfig['upstreamAuth'];
  upstreamTls: UpstreamTlsConfig;
}

/** A node's error reply, as the node worded it. */
export class NodeError extends Error {}

/**
 * One side of a migration (the source or the target): its own pools and topology, apart from the
 * clients' (a DUMP of a big key never waits in a client's link, and a target's failure never
 * reaches a client). Calls go to the primary that owns a key's slot, in a database.
 */
export class MigrationSide {
  readonly pools: UpstreamPools;
  readonly refresher: TopologyRefresher;

  constructor(readonly name: 'source' | 'target', readonly address: SideAddress, config: RespoolConfig, log: Logger) {
    // The proxy's settings, with this side's upstreams, mode and credentials (as a tenant's own upstreams: backend.ts).
    const own = Object.assign(Object.create(config) as RespoolConfig, { upstreams: address.seeds, mode: address.mode, upstreamAuth: address.upstreamAuth, upstreamTls: address.upstreamTls });
    this.pools = new UpstreamPools(own);
    this.refresher = new TopologyRefresher({ seeds: address.seeds, mode: address.mode, pools: this.pools, minIntervalMs: config.cluster.refreshMinIntervalMs, periodMs: config.cluster.refreshPeriodMs, log: log.child({ migration: name }) });
    this.refresher.onChange((topology, change) => {
      if (change === 'discovered') this.pools.retainOnly(new Set(topology.allNodes().map((n) => n.address)));
    });
  }

  get topology(): Topology | null {
    return this.refresher.current;
  }

  get isCluster(): boolean {
    return this.topology?.mode === 'cluster';
  }

  /** Discovers the side once; the reason it could not, or null. */
  async discover(): Promise<string | null> {
    const seed = this.address.seeds[0]!;
    try {
      // A PING first: its failure names the cause (refused, AUTH refused, TLS) where discovery would only say "failed".
      await this.call(seed, 0, ['PING']);
    } catch (err) {
      return `${seed.host}:${seed.port}: ${(err as Error).message}`;
    }
    return (await this.refresher.refreshNow('startup')) === null ? `${seed.host}:${seed.port}: its topology could not be read` : null;
  }

  primaries(): ClusterNode[] {
    return this.topology?.primaries() ?? [];
  }

  /** The primary that owns the key's slot (a standalone side's only node). */
  ownerOf(key: Buffer): ClusterNode {
    const topology = this.topology;
    if (topology === null) throw new NodeError(`the ${this.name}'s topology is not known`);
    const node = topology.mode === 'cluster' ? topology.primaryForSlot(calculateSlot(key)) : topology.shards[0]?.primary;
    if (node === undefined) throw new NodeError(`no ${this.name} node owns slot ${calculateSlot(key)}`);
    return node;
  }

  /** One command on a node, in a database; its decoded reply. A node's error reply rejects with NodeError (a MOVED asks for a refresh). */
  async call(node: { host: string; port: number }, db: number, args: ReadonlyArray<string | Buffer | number>): Promise<RespValue> {
    const reply = decodeReply(await this.pools.get(node.host, node.port, 2, 'primary', db).call(args));
    if (reply instanceof RespError) {
      if (reply.message.startsWith('MOVED ') || reply.message.startsWith('ASK ')) this.refresher.requestRefresh('moved');
      throw new NodeError(reply.message);
    }
    return reply;
  }

  /** The same, for the key's owner. */
  callFor(key: Buffer, db: number, args: ReadonlyArray<string | Buffer | number>): Promise<RespValue> {
    return this.call(this.ownerOf(key), db, args);
  }

  close(): void {
    this.refresher.stop();
    this.pools.closeAll();
  }
}
