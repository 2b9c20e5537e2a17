/**
 * How many retired workers may still relay a takeover's TLS clients (workers/takeover.ts
 * relaysPastBound): past count × RELAY_GENERATIONS, the oldest end; workers that exited or are
 * still connected (draining, not relaying) never count.
 */
import { describe, expect, it } from 'vitest';
import { relaysPastBound } from '../../src/workers/takeover.js';

const worker = (name: string, state: 'relaying' | 'dead' | 'connected') => ({
  name,
  isDead: () => state === 'dead',
  isConnected: () => state === 'connected',
});

describe('takeover relays', () => {
  it('ends the oldest relaying workers past the bound, and only relaying ones', () => {
    const retiring = [worker('a', 'relaying'), worker('b', 'dead'), worker('c', 'relaying'), worker('d', 'connected'), worker('e', 'relaying')];
    expect(relaysPastBound(retiring, 3).map((w) => w.name)).toEqual([]);
    expect(relaysPastBound(retiring, 2).map((w) => w.name)).toEqual(['a']);
    expect(relaysPastBound(retiring, 0).map((w) => w.name)).toEqual(['a', 'c', 'e']);
  });
});
