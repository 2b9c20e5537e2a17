// The faults of bench/soak.mjs, in the order they rotate. Each run(ctx) does the fault and waits
// until it is over (the cluster stable again, the member serving again), and resolves to a line
// saying what it did; ctx = { cluster (soak-cluster.mjs), fleet (soak-fleet.mjs), freezeS,
// slowS, holdS, reshardSlots, turn (per fault: how many times it ran before) }.
import { sleep } from './common.mjs';

/** Primaries that may be killed or frozen: not the relayed one (the slow link's), with a replica. */
async function victims(cluster) {
  const shards = await cluster.shards();
  const out = shards.filter((s) => s.primary !== cluster.far && s.replicas.length > 0);
  if (out.length === 0) throw new Error('no primary with a live replica to take down');
  return out;
}

/** The last `count` slots a shard owns. */
function lastSlots(shard, count) {
  const all = shard.slots.flatMap(([a, b]) => Array.from({ length: b - a + 1 }, (_, i) => a + i));
  return all.slice(-count);
}

const secs = (ms) => `${(ms / 1000).toFixed(1)} s`;

export const FAULTS = [
  {
    name: 'primary killed',
    async run({ cluster, turn }) {
      const list = await victims(cluster);
      const shard = list[turn % list.length];
      const [victim, replica] = [shard.primary, shard.replicas[0]];
      const t = Date.now();
      await cluster.killAfterCatchUp(victim, replica);
      await cluster.waitPromoted(replica, 120_000);
      const promoted = Date.now() - t;
      await cluster.restart(victim).catch(async (e) => {
        await sleep(5000);
        await cluster.restart(victim).catch(() => {
          throw e;
        });
      });
      await cluster.waitStable(120_000);
      return `${victim.address} SIGKILLed (writes paused until ${replica.address} had them); ${replica.address} primary after ${secs(promoted)}; ${victim.address} back as a replica, cluster stable after ${secs(Date.now() - t)}`;
    },
  },
  {
    name: 'primary frozen',
    async run({ cluster, turn, freezeS }) {
      const list = await victims(cluster);
      const victim = list[turn % list.length].primary;
      cluster.freeze(victim);
      try {
        await sleep(freezeS * 1000);
      } finally {
        cluster.thaw(victim);
      }
      const t = Date.now();
      await cluster.waitStable(120_000);
      return `${victim.address} SIGSTOP for ${freezeS} s, then SIGCONT; cluster stable ${secs(Date.now() - t)} later`;
    },
  },
  {
    name: 'reshard',
    async run({ cluster, turn, reshardSlots }) {
      const shards = await cluster.shards();
      const from = shards[turn % shards.length];
      const to = shards[(turn + 1) % shards.length];
      const slots = lastSlots(from, reshardSlots);
      const t = Date.now();
      const keys = await cluster.moveSlots(from.primary, to.primary, slots);
      await cluster.waitStable(120_000);
      return `slots ${slots[0]}-${slots.at(-1)} (${slots.length}, ${keys} keys) moved ${from.primary.address} → ${to.primary.address} in ${secs(Date.now() - t)}`;
    },
  },
  {
    name: 'node added and removed',
    async run({ cluster, holdS, reshardSlots }) {
      const shards = await cluster.shards();
      const count = (s) => s.slots.reduce((n, [a, b]) => n + b - a + 1, 0);
      const from = shards.reduce((a, b) => (count(a) >= count(b) ? a : b));
      const node = await cluster.addNode();
      const slots = lastSlots((await cluster.shards()).find((s) => s.primary === from.primary), Math.max(1, reshardSlots >> 1));
      const there = await cluster.moveSlots(from.primary, node, slots);
      await cluster.waitStable(120_000);
      await sleep(holdS * 1000);
      const back = await cluster.moveSlots(node, from.primary, slots);
      await cluster.waitStable(120_000);
      await cluster.removeNode(node);
      await cluster.waitStable(120_000);
      return `${node.address} added; slots ${slots[0]}-${slots.at(-1)} (${there} keys) moved to it from ${from.primary.address} for ${holdS} s and back (${back} keys); node forgotten and stopped`;
    },
  },
  {
    name: 'fleet member B restarted',
    async run({ fleet }) {
      return `SIGTERM; ${await fleet.b.restart()}`;
    },
  },
  {
    name: 'takeover on member A',
    async run({ fleet }) {
      const t = Date.now();
      const what = await fleet.a.takeover();
      return `SIGUSR2 to supervisor ${fleet.a.pid}: ${what} in ${secs(Date.now() - t)}`;
    },
  },
  {
    name: 'slow link',
    async run({ cluster, slowS }) {
      cluster.setLink({ delayMs: { toNode: 50, toClient: 50 }, jitterMs: 5, holdShare: 0.02, holdMs: 200 });
      try {
        await sleep(slowS * 1000);
      } finally {
        cluster.setLink({ delayMs: { toNode: 0, toClient: 0 }, jitterMs: 0, holdShare: 0 });
      }
      return `${cluster.far.address} (relay ${cluster.relay.port}): 50 ms each way ±5, 2% of chunks held 200 ms more, for ${slowS} s`;
    },
  },
];
