// The fleet's slot division (src/fleet/slot-division.ts): a pure function of the live member
// ids, covering every slot once, moving only a lost member's slots, spreading them evenly enough.
import { describe, expect, it } from 'vitest';
import { divideSlots, formatRuns, RANGE_SIZE, rangeOwners, RANGES, slotCount } from '../../src/fleet/slot-division.js';
import { ClusterEmulation, nodeId } from '../../src/fleet/cluster-emulation.js';

const ids = (n: number) => Array.from({ length: n }, (_, i) => nodeId({ host: '10.0.0.' + (i + 1), port: 6380 }));

function ownerOfSlot(division: Map<string, ReadonlyArray<readonly [number, number]>>): string[] {
  const owner = new Array<string>(16384).fill('');
  for (const [id, runs] of division) for (const [s, e] of runs) for (let slot = s; slot <= e; slot++) {
    if (owner[slot] !== '') throw new Error(`slot ${slot} owned twice`);
    owner[slot] = id;
  }
  return owner;
}

describe('slot division', () => {
  it('covers every slot exactly once, in whole 64-slot ranges, whatever the order of the ids', () => {
    for (const n of [1, 2, 3, 5, 12]) {
      const members = ids(n);
      const division = divideSlots(members);
      expect(ownerOfSlot(division).every((o) => o !== '')).toBe(true);
      expect(divideSlots([...members].reverse())).toEqual(division);
      for (const runs of division.values()) for (const [s, e] of runs) expect([s % RANGE_SIZE, (e + 1) % RANGE_SIZE]).toEqual([0, 0]);
    }
    expect(RANGES * RANGE_SIZE).toBe(16384);
    expect(divideSlots(ids(1)).get(ids(1)[0]!)).toEqual([[0, 16383]]);
  });

  it('a member that leaves takes only its own slots; one that comes back gets exactly those', () => {
    const five = ids(5);
    const before = ownerOfSlot(divideSlots(five));
    for (const gone of five) {
      const after = ownerOfSlot(divideSlots(five.filter((id) => id !== gone)));
      const moved = after.filter((o, slot) => o !== before[slot]).length;
      expect(moved).toBe(before.filter((o) => o === gone).length);
      expect(after.includes(gone)).toBe(false);
    }
    expect(ownerOfSlot(divideSlots(five))).toEqual(before);
  });

  it('spreads slots within a few percent of even (3 members: each 1/3 ± 20%)', () => {
    const three = ids(3);
    const counts = [...divideSlots(three).values()].map(slotCount);
    for (const c of counts) expect(Math.abs(c / (16384 / 3) - 1)).toBeLessThan(0.2);
    expect(rangeOwners(three)).toHaveLength(RANGES);
    expect(formatRuns([[0, 63], [128, 128]])).toBe('0-63 128');
  });
});

describe('the emulated cluster of a fleet', () => {
  const members = [
    { host: '10.0.0.1', port: 6380, state: 'alive' as const, self: true },
    { host: '10.0.0.2', port: 6380, state: 'suspect' as const, self: false },
    { host: '10.0.0.3', port: 6380, state: 'fail' as const, self: false },
    { host: '10.0.0.4', port: 6380, state: 'joining' as const, self: false },
  ];

  it('gives slots to this instance and the alive and suspect members only', () => {
    const view = new ClusterEmulation(members);
    const live = [nodeId(members[0]!), nodeId(members[1]!)];
    const expected = divideSlots(live);
    for (const n of view.nodes) expect(n.slots).toEqual(expected.get(n.id) ?? []);
    expect(view.self.address).toBe('10.0.0.1:6380');
    const runs = view.slotRuns();
    expect(runs[0]!.run[0]).toBe(0);
    expect(runs.reduce((n, r) => n + r.run[1] - r.run[0] + 1, 0)).toBe(16384);
    // Members without slots come last.
    expect(view.nodes.slice(2).map((n) => n.state).sort()).toEqual(['fail', 'joining']);
  });
});
