import { SLOT_COUNT, type Topology } from '../cluster/topology.js';

/** What /readyz answers: ready, or why not (which slots, which node). */
export interface Readiness {
  ready: boolean;
  reason?: string;
  /** Primaries that own slots but cannot be reached, with their slots. */
  unreachable?: Array<{ node: string; slots: string; why: string }>;
  /** Slots no shard serves, as ranges ("0-99,200"). */
  uncovered?: string;
}

/**
 * Why a primary cannot be reached, or null when it can: the topology marks it failed, its
 * circuit is open (or probing after open), or its links were lost and none is open again.
 */
export type PrimaryCheck = (address: string, topologyHealth: string) => string | null;

/**
 * Ready when the topology is known, every slot has an owner, and every owning primary is
 * reachable. A node respool has never needed to dial counts as reachable (nothing says otherwise).
 */
export function readiness(topology: Topology | null, check: PrimaryCheck): Readiness {
  if (topology === null) return { ready: false, reason: 'topology not known yet' };
  const unreachable: NonNullable<Readiness['unreachable']> = [];
  for (const shard of topology.shards) {
    if (shard.slots.length === 0) continue;
    const why = check(shard.primary.address, shard.primary.health);
    if (why !== null) unreachable.push({ node: shard.primary.address, slots: formatRanges(shard.slots), why });
  }
  const covered = topology.coveredSlots();
  const uncovered = covered < SLOT_COUNT ? uncoveredRanges(topology) : undefined;
  if (unreachable.length === 0 && uncovered === undefined) return { ready: true };
  const reasons: string[] = [];
  for (const u of unreachable) reasons.push(`primary ${u.node} (slots ${u.slots}) unreachable: ${u.why}`);
  if (uncovered !== undefined) reasons.push(`${SLOT_COUNT - covered} slots have no primary: ${uncovered}`);
  return {
    ready: false,
    reason: reasons.join('; '),
    ...(unreachable.length > 0 ? { unreachable } : {}),
    ...(uncovered !== undefined ? { uncovered } : {}),
  };
}

function formatRanges(ranges: ReadonlyArray<readonly [number, number]>): string {
  return ranges.map(([a, b]) => (a === b ? String(a) : `${a}-${b}`)).join(',');
}

function uncoveredRanges(topology: Topology): string {
  const out: Array<[number, number]> = [];
  let start = -1;
  for (let slot = 0; slot <= SLOT_COUNT; slot++) {
    const free = slot < SLOT_COUNT && topology.primaryForSlot(slot) === undefined;
    if (free && start < 0) start = slot;
    if (!free && start >= 0) {
      out.push([start, slot - 1]);
      start = -1;
    }
  }
  return formatRanges(out);
}
