import calculateSlot from 'cluster-key-slot';
import { startCluster, startStandalone, type ValkeyCluster, type ValkeyNode } from '../harness/valkey-processes.js';
import type { RespoolProxy } from '../../src/server.js';
import type { RespoolConfig } from '../../src/config/types.js';
import { startTestProxy } from './proxy.js';
import { transcript, type Step } from './transcript.js';

/**
 * respool in front of a 3-primary + 3-replica cluster next to one standalone valkey-server: the
 * oracle for commands over keys in several slots, which through respool must answer exactly as
 * one server does.
 */
export interface OneServerSides {
  cluster: ValkeyCluster;
  /** One standalone valkey-server: what an application written for one server talks to. */
  standalone: ValkeyNode;
  proxy: RespoolProxy;
  /** Both sides emptied. */
  flush(): Promise<void>;
  /** `steps` run on the standalone server and through respool (each side flushed first): both transcripts. */
  both(proto: 2 | 3, steps: Step[]): Promise<{ expected: string[]; actual: string[] }>;
  stop(): Promise<void>;
}

export async function startOneServerSides(overrides: Partial<RespoolConfig> = {}): Promise<OneServerSides> {
  const [cluster, standalone] = await Promise.all([startCluster({ primaries: 3, replicasPerPrimary: 1 }), startStandalone()]);
  const seed = cluster.nodes[0]!;
  const proxy = await startTestProxy([{ host: seed.host, port: seed.port }], overrides);
  const flush = async (): Promise<void> => {
    await Promise.all([cluster.flushAll(), standalone.call('FLUSHALL')]);
  };
  return {
    cluster,
    standalone,
    proxy,
    flush,
    async both(proto, steps) {
      await flush();
      const expected = await transcript(standalone.port, proto, steps);
      await flush();
      const actual = await transcript(proxy.address.port, proto, steps);
      return { expected, actual };
    },
    async stop() {
      await proxy.close();
      await Promise.all([cluster.stop(), standalone.stop()]);
    },
  };
}

/** `n` keys named `${prefix}<i>`, each in a different slot and, round robin, on each primary. */
export async function keysOverNodes(cluster: ValkeyCluster, prefix: string, n: number): Promise<string[]> {
  const shards = await cluster.shards();
  const primaries = shards.map((s) => s.primary);
  const ownerOf = new Map<number, number>();
  for (const shard of shards) for (const [a, b] of shard.slots) for (let slot = a; slot <= b; slot++) ownerOf.set(slot, shard.primary.port);
  const out: string[] = [];
  const slots = new Set<number>();
  for (let i = 0; out.length < n; i++) {
    const key = `${prefix}${i}`;
    const slot = calculateSlot(key);
    const want = primaries[out.length % primaries.length]!.port;
    if (slots.has(slot) || ownerOf.get(slot) !== want) continue;
    slots.add(slot);
    out.push(key);
  }
  return out;
}
