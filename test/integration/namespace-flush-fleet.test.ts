/**
 * A namespace's FLUSHDB in a fleet (handlers/namespace-scope.ts, fleet/fleet-broadcast.ts): a
 * tracking client of the namespace on another member gets one "invalidate everything", as from
 * one server's flush — not one invalidation per key removed — like one on the flushing member.
 * One valkey-server is the oracle: the same exchange, the same pushes. A client of another
 * namespace on the other member hears nothing.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, startStandalone, type ValkeyNode } from '../harness/valkey-processes.js';
import { RawConnection } from '../helpers/raw-resp.js';
import { oracleFlushPushes, pushesUntilQuiet, trackingReader } from '../helpers/tracking-reader.js';
import { startFleetMember } from '../helpers/proxy.js';
import { waitFor } from '../helpers/wait.js';
import type { RespoolConfig } from '../../src/config/types.js';
import type { RespoolProxy } from '../../src/server.js';

const KEYS = Array.from({ length: 20 }, (_, i) => `k${i}`);

const users = [
  { name: 'default', password: 'adminpw' },
  { name: 'a', password: 'pa', keyPrefix: 'a:' },
  { name: 'b', password: 'pb', keyPrefix: 'b:' },
] as unknown as RespoolConfig['users'];

describe('a namespace\'s flush in a fleet: one invalidation on every member', () => {
  let oracle: ValkeyNode;
  let server: ValkeyNode;
  const members: RespoolProxy[] = [];

  beforeAll(async () => {
    [oracle, server] = await Promise.all([startStandalone(), startStandalone()]);
    const ports = [await freePort(), await freePort()];
    for (const port of ports) members.push(await startFleetMember([{ host: server.host, port: server.port }], ports, port, { users, mode: 'standalone' } as never));
    await waitFor(() => members.every((m) => m.fleetState!.liveMembers().length === 2 && m.fleetState!.subscribed), 'both members registered, on the bus', 15_000);
  }, 60_000);

  afterAll(async () => {
    await Promise.all(members.map((m) => m.close()));
    await Promise.all([oracle?.stop(), server?.stop()]);
  });

  it('FLUSHDB through one member: the namespace\'s tracking client on the other gets the oracle\'s one push', async () => {
    // The oracle: a tracking client read the keys, another client flushes.
    const want = await oracleFlushPushes(oracle.port, KEYS);

    // Through the fleet: the flusher of namespace a on member 0, a reader of a and one of b on member 1.
    const [first, second] = members as [RespoolProxy, RespoolProxy];
    const flusher = await RawConnection.connect(first.address.port);
    expect(await flusher.call('AUTH', 'a', 'pa')).toBe('+OK\r\n');
    const other = await RawConnection.connect(first.address.port);
    expect(await other.call('AUTH', 'b', 'pb')).toBe('+OK\r\n');
    for (const key of KEYS) {
      await flusher.call('SET', key, '1');
      await other.call('SET', key, '1');
    }
    const reader = await trackingReader(second.address.port, ['a', 'pa'], KEYS);
    const otherReader = await trackingReader(second.address.port, ['b', 'pb'], KEYS);
    expect(await flusher.call('FLUSHDB')).toBe('+OK\r\n');
    expect(await pushesUntilQuiet(reader)).toEqual(want);
    expect(await pushesUntilQuiet(otherReader)).toEqual([]);
    expect(await flusher.call('DBSIZE')).toBe(':0\r\n');
    expect(await other.call('DBSIZE')).toBe(`:${KEYS.length}\r\n`);
    for (const c of [reader, otherReader, flusher, other]) c.close();
  }, 60_000);
});
