import { describe, expect, it } from 'vitest';
import { LeaseGate } from '../../src/upstream/lease-gate.js';

// The process-wide bound on leased connections (dedicated.maxTotal), alone: places taken up to
// the bound, dials past it granted oldest first as places come back, a bound a reload raised.

describe('LeaseGate', () => {
  it('gives places up to the bound, then queues dials and grants them oldest first as places come back', () => {
    let max = 2;
    const gate = new LeaseGate(() => max);
    const granted: string[] = [];
    expect(gate.take(() => granted.push('a'))).toBe(true);
    expect(gate.take(() => granted.push('b'))).toBe(true);
    expect(gate.take(() => granted.push('c'))).toBe(false);
    expect(gate.take(() => granted.push('d'))).toBe(false);
    expect([gate.used, gate.queued]).toEqual([2, 2]);
    gate.give();
    expect(granted).toEqual(['c']);
    expect([gate.used, gate.queued]).toEqual([2, 1]);
    // a free place does not let a newcomer overtake a dial already waiting
    max = 3;
    expect(gate.take(() => granted.push('e'))).toBe(false);
    gate.admit();
    expect(granted).toEqual(['c', 'd']);
    gate.give();
    expect(granted).toEqual(['c', 'd', 'e']);
    expect([gate.used, gate.queued]).toEqual([3, 0]);
  });

  it('once closed, waiting dials go ahead and new ones take a place at once (they open closed connections)', () => {
    const gate = new LeaseGate(() => 1);
    const granted: string[] = [];
    gate.take(() => granted.push('a'));
    gate.take(() => granted.push('b'));
    gate.close();
    expect(granted).toEqual(['b']);
    expect(gate.take(() => granted.push('c'))).toBe(true);
    expect(gate.used).toBe(3);
    gate.give();
    gate.give();
    gate.give();
    expect(gate.used).toBe(0);
  });
});
