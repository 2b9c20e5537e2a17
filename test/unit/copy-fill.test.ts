// Copy fills (src/hotkeys/copy-fill.ts) against a fake fleet bus and a fake upstream: the order
// of events the consistency of split copies rests on.
import { describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { CopyFills, namesHash, type FillHost } from '../../src/hotkeys/copy-fill.js';
import { makeCopy, SplitKey } from '../../src/hotkeys/split-key.js';
import type { FleetState } from '../../src/fleet/fleet-state.js';
import type { FleetStore } from '../../src/fleet/fleet-store.js';
import { sleep, waitFor } from '../helpers/wait.js';

const log = pino({ level: 'silent' });

function splitKey(): SplitKey {
  const split = new SplitKey(Buffer.from('hk'), { kind: 'key', text: 'hk', bytes: Buffer.from('hk'), copies: 3, auto: false, reading: true });
  split.active = [split.original, makeCopy(Buffer.from('hk{rpcopy:1.0}'), 'n2'), makeCopy(Buffer.from('hk{rpcopy:1.1}'), 'n3')];
  return split;
}

/** A bus that delivers what is published to every handler (this member's own messages too). */
function fakeFleet(memberId: string, live: string[]) {
  const handlers = new Map<string, Array<(m: Record<string, unknown>) => void>>();
  const published: Array<Record<string, unknown>> = [];
  const state = {
    memberId,
    subscribed: true,
    confirmed: () => true,
    liveMembers: () => live,
    beatNow: async () => {},
    on: (t: string, fn: (m: Record<string, unknown>) => void) => handlers.set(t, [...(handlers.get(t) ?? []), fn]),
    publish: async (m: Record<string, unknown>) => {
      published.push(m);
      queueMicrotask(() => { for (const fn of handlers.get(String(m['t'])) ?? []) fn(m); });
    },
  };
  const store = { tryLock: async () => true, unlock: async () => {} };
  const deliver = (m: Record<string, unknown>) => { for (const fn of handlers.get(String(m['t'])) ?? []) fn(m); };
  return { deps: { state: state as unknown as FleetState, store: store as unknown as FleetStore }, published, deliver };
}

function fakeHost(split: SplitKey) {
  const calls: string[] = [];
  let released = 0;
  let barriers = 0;
  const host: FillHost = {
    splitFor: (id) => (id === split.id ? split : null),
    releaseParked: (s) => {
      released++;
      const parked = s.parked;
      s.parked = [];
      for (const send of parked) send();
    },
    call: async (_slot, args) => {
      calls.push(String(args[0]));
      return args[0] === 'DUMP' ? Buffer.from('dump') : args[0] === 'PTTL' ? -1 : 'OK';
    },
    barrier: async () => {
      barriers++;
    },
    maxCopyAge: () => 1000,
  };
  return { host, calls, released: () => released, barriers: () => barriers };
}

describe('a member answering a fill', () => {
  it('holds the key, stops reading its copies, answers held only once its writes are answered, and reads again after filled', async () => {
    const split = splitKey();
    split.readableUntil = Date.now() + 5000;
    const { host, released, barriers } = fakeHost(split);
    const bus = fakeFleet('m1', ['m1']);
    const fills = new CopyFills(host, bus.deps, log);
    split.inflightWrites = 1;
    const heldAt = Date.now(); // the copies are readable for maxCopyAge (1000) from the hold's arrival
    bus.deliver({ t: 'hold', id: 'f1', k: Buffer.from('hk').toString('base64'), h: namesHash(split), from: 'm2' });
    const heldBy = Date.now(); // the hold is taken synchronously on delivery
    await sleep(20);
    expect(split.holds.has('f1')).toBe(true);
    expect(split.readableUntil).toBe(0);
    expect(bus.published).toEqual([]); // a write is still in flight
    const sent: string[] = [];
    expect(fills.park(split, () => sent.push('SET'))).toBe(true);
    split.inflightWrites = 0;
    await waitFor(() => bus.published.length === 1, 'held');
    expect(bus.published[0]).toEqual({ t: 'held', id: 'f1', m: 'm1' });
    expect(barriers()).toBe(1);
    expect(sent).toEqual([]);
    bus.deliver({ t: 'filled', id: 'f1', k: Buffer.from('hk').toString('base64') });
    expect(split.holds.size).toBe(0);
    expect(sent).toEqual(['SET']);
    expect(released()).toBe(1);
    expect(split.readableUntil).toBeGreaterThanOrEqual(heldAt + 1000);
    expect(split.readableUntil).toBeLessThanOrEqual(heldBy + 1000);
    fills.stop();
  });

  it('stays silent for a fill of other copy names, and a release leaves the copies unread', async () => {
    const split = splitKey();
    const { host } = fakeHost(split);
    const bus = fakeFleet('m1', ['m1']);
    const fills = new CopyFills(host, bus.deps, log);
    bus.deliver({ t: 'hold', id: 'f1', k: Buffer.from('hk').toString('base64'), h: 'other', from: 'm2' });
    await sleep(20);
    expect(split.holds.size).toBe(0);
    expect(bus.published).toEqual([]);
    bus.deliver({ t: 'hold', id: 'f2', k: Buffer.from('hk').toString('base64'), h: namesHash(split), from: 'm2' });
    await waitFor(() => bus.published.length === 1, 'held');
    bus.deliver({ t: 'release', id: 'f2', k: Buffer.from('hk').toString('base64') });
    expect(split.holds.size).toBe(0);
    expect(split.readableUntil).toBe(0);
    fills.stop();
  });
});

describe('the filler', () => {
  it('aborts without writing a copy when a member does not hold', async () => {
    const split = splitKey();
    const { host, calls } = fakeHost(split);
    const bus = fakeFleet('m1', ['m1', 'm2']); // m2 never answers
    const fills = new CopyFills(host, bus.deps, log);
    expect(await fills.fill(split)).toBe('aborted');
    expect(calls).toEqual([]);
    expect(bus.published.map((m) => m['t'])).toEqual(['hold', 'held', 'release']);
    expect(split.readableUntil).toBe(0);
    fills.stop();
  });

  it('copies the original once every member holds, then announces filled', async () => {
    const split = splitKey();
    const { host, calls } = fakeHost(split);
    const bus = fakeFleet('m1', ['m1', 'm2']);
    const fills = new CopyFills(host, bus.deps, log);
    const outcome = fills.fill(split);
    await waitFor(() => bus.published.some((m) => m['t'] === 'hold'), 'hold');
    const id = bus.published.find((m) => m['t'] === 'hold')!['id'];
    bus.deliver({ t: 'held', id, m: 'm2' });
    expect(await outcome).toBe('ok');
    expect(calls.sort()).toEqual(['DUMP', 'PTTL', 'RESTORE', 'RESTORE']);
    expect(bus.published.map((m) => m['t'])).toEqual(['hold', 'held', 'filled']);
    await waitFor(() => split.readableUntil > Date.now(), 'readable here too');
    fills.stop();
  });
});

describe('one instance', () => {
  it('parks writes while it copies, then sends them; copies readable for maxCopyAge from the fill', async () => {
    const split = splitKey();
    const { host, calls } = fakeHost(split);
    const fills = new CopyFills(host, null, log);
    const sent: string[] = [];
    const startedAt = Date.now();
    const outcome = fills.fill(split);
    expect(split.holds.size).toBe(1);
    fills.park(split, () => sent.push('SET'));
    expect(await outcome).toBe('ok');
    expect(sent).toEqual(['SET']);
    expect(calls.sort()).toEqual(['DUMP', 'PTTL', 'RESTORE', 'RESTORE']);
    // maxCopyAge (1000 ms) from the fill, which ended after startedAt (however slow the machine).
    expect(split.readableUntil).toBeGreaterThanOrEqual(startedAt + 1000);
    expect(split.readableUntil).toBeLessThanOrEqual(Date.now() + 1000);
    fills.stop();
  });
});
