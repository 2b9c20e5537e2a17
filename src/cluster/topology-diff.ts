import { SLOT_COUNT, type Topology } from './topology.js';

/** What changed between two topology snapshots, for the operator's log line. */
export interface TopologyDiff {
  changed: boolean;
  /** Slots whose primary changed (including slots that gained or lost an owner). */
  slotsMoved: number;
  /** Per new owner ("host:port" or "none"): how many slots it took over. */
  movedTo: Record<string, number>;
  nodesAdded: string[];
  nodesRemoved: string[];
  /** Nodes whose role changed (a failover: replica → primary, primary → replica). */
  roleChanges: string[];
}

/** Compares two snapshots slot by slot and node by node (16384 lookups: refreshes only, never per request). */
export function diffTopology(prev: Topology | null, next: Topology): TopologyDiff {
  const movedTo: Record<string, number> = {};
  let slotsMoved = 0;
  for (let slot = 0; slot < SLOT_COUNT; slot++) {
    const before = prev?.primaryForSlot(slot)?.address;
    const after = next.primaryForSlot(slot)?.address;
    if (before !== after) {
      slotsMoved++;
      const to = after ?? 'none';
      movedTo[to] = (movedTo[to] ?? 0) + 1;
    }
  }
  const roles = (t: Topology | null) => new Map((t?.allNodes() ?? []).map((n) => [n.address, n.role]));
  const a = roles(prev);
  const b = roles(next);
  const nodesAdded = [...b.keys()].filter((k) => !a.has(k));
  const nodesRemoved = [...a.keys()].filter((k) => !b.has(k));
  const roleChanges = [...b].filter(([k, r]) => a.has(k) && a.get(k) !== r).map(([k, r]) => `${k}→${r}`);
  const changed = slotsMoved > 0 || nodesAdded.length > 0 || nodesRemoved.length > 0 || roleChanges.length > 0;
  return { changed, slotsMoved, movedTo, nodesAdded, nodesRemoved, roleChanges };
}
