import { nodeCrypto } from '../util/lazy-builtins.js';
import { SLOT_COUNT } from '../cluster/topology.js';

/**
 * How the 16384 slots are divided among the live members of a fleet: one pure function of the
 * set of member ids, so every instance that sees the same members shows cluster clients the same
 * CLUSTER SLOTS.
 *
 * Rendezvous (highest-random-weight) hashing over RANGES fixed ranges of RANGE_SIZE slots: each
 * range goes to the member with the highest hash(member id, range). A member that leaves takes
 * only its own ranges with it (each goes to its runner-up), and a member that comes back gets
 * exactly those back; nobody else's slots move. 256 ranges keep CLUSTER SLOTS short (about
 * 170 entries for 3 members) while spreading slots within a few percent: with 3 members each
 * gets 1/3 ± ~9% (one standard deviation) of the slots, which only shifts how many cluster
 * clients go to each instance — every instance serves every slot.
 */
export const RANGE_SIZE = 64;
export const RANGES = SLOT_COUNT / RANGE_SIZE;

/** Inclusive [start, end] slot runs. */
export type SlotRun = readonly [number, number];

/** member id → its slot runs, in slot order; members without slots are absent. */
export function divideSlots(memberIds: readonly string[]): Map<string, SlotRun[]> {
  const out = new Map<string, SlotRun[]>();
  if (memberIds.length === 0) return out;
  const owners = rangeOwners(memberIds);
  for (let r = 0; r < RANGES; r++) {
    const owner = owners[r]!;
    let runs = out.get(owner);
    if (runs === undefined) {
      runs = [];
      out.set(owner, runs);
    }
    const start = r * RANGE_SIZE;
    const end = start + RANGE_SIZE - 1;
    const last = runs[runs.length - 1];
    if (last !== undefined && last[1] === start - 1) runs[runs.length - 1] = [last[0], end];
    else runs.push([start, end]);
  }
  return out;
}

/** The owner of each range (by index). */
export function rangeOwners(memberIds: readonly string[]): string[] {
  const owners: string[] = [];
  for (let r = 0; r < RANGES; r++) {
    let best = '';
    let bestScore = -1;
    for (const id of memberIds) {
      const score = weight(id, r);
      // Ties (astronomically rare) go to the smaller id, so the rule stays deterministic.
      if (score > bestScore || (score === bestScore && id < best)) {
        best = id;
        bestScore = score;
      }
    }
    owners.push(best);
  }
  return owners;
}

/** "0-63 128-191" (CLUSTER NODES' slot list) for runs. */
export function formatRuns(runs: readonly SlotRun[]): string {
  return runs.map(([s, e]) => (s === e ? `${s}` : `${s}-${e}`)).join(' ');
}

export function slotCount(runs: readonly SlotRun[]): number {
  let n = 0;
  for (const [s, e] of runs) n += e - s + 1;
  return n;
}

function weight(memberId: string, range: number): number {
  return nodeCrypto().createHash('sha1').update(`${memberId}/${range}`).digest().readUInt32BE(0);
}
