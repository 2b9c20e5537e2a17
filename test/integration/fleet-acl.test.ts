// Users changed at run time in a fleet (issues 18 and 20): an ACL SETUSER / DELUSER through one
// instance applies on every instance within a beat and on an instance started later (the state
// is kept in the upstream, fleet/fleet-acl.ts); the fleet's own keys are refused to clients.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, startCluster, type ValkeyCluster } from '../harness/valkey-processes.js';
import { RawConnection } from '../helpers/raw-resp.js';
import type { RespoolProxy } from '../../src/server.js';
import { startFleetMember } from '../helpers/proxy.js';
import { waitFor } from '../helpers/wait.js';


async function auth(port: number, user: string, password: string): Promise<string> {
  const c = await RawConnection.connect(port);
  try {
    return await c.call('AUTH', user, password);
  } finally {
    c.close();
  }
}

describe('users changed at run time reach the whole fleet', () => {
  let cluster: ValkeyCluster;
  const proxies: RespoolProxy[] = [];
  let ports: number[] = [];
  let seed: Array<{ host: string; port: number }> = [];

  beforeAll(async () => {
    cluster = await startCluster({ primaries: 3, replicasPerPrimary: 1 });
    ports = [await freePort(), await freePort(), await freePort()];
    seed = [{ host: cluster.nodes[0]!.host, port: cluster.nodes[0]!.port }];
    for (const port of ports.slice(0, 2)) proxies.push(await startFleetMember(seed, ports, port));
    await waitFor(() => proxies.every((p) => p.fleetState!.liveMembers().length === 2), 'both members registered', 10_000);
  }, 60_000);

  afterAll(async () => {
    await Promise.all(proxies.map((p) => p.close()));
    await cluster?.stop();
  });

  it('SETUSER through A works on B within a second, and on C started later; DELUSER closes B\'s clients', async () => {
    const [a, b] = proxies as [RespoolProxy, RespoolProxy];
    const admin = await RawConnection.connect(a.address.port);
    expect(await admin.call('ACL', 'SETUSER', 'fleetuser', 'on', '>fpw', '~f:*', '+get', '+set')).toBe('+OK\r\n');
    const t0 = Date.now();
    await waitFor(async () => (await auth(b.address.port, 'fleetuser', 'fpw')) === '+OK\r\n', 'fleetuser on B', 5000);
    expect(Date.now() - t0).toBeLessThan(1000);
    // The same user, password hash and rules on both.
    const onB = await RawConnection.connect(b.address.port);
    expect(await onB.call('ACL', 'GETUSER', 'fleetuser')).toBe(await admin.call('ACL', 'GETUSER', 'fleetuser'));
    // A member started after the change has the user from the shared state.
    const c = await startFleetMember(seed, ports, ports[2]!);
    proxies.push(c);
    await waitFor(async () => (await auth(c.address.port, 'fleetuser', 'fpw')) === '+OK\r\n', 'fleetuser on C', 5000);
    // DELUSER through A: B's client of that user is closed, nobody can AUTH as it any more.
    const client = await RawConnection.connect(b.address.port);
    expect(await client.call('AUTH', 'fleetuser', 'fpw')).toBe('+OK\r\n');
    expect(await admin.call('ACL', 'DELUSER', 'fleetuser')).toBe(':1\r\n');
    await client.waitClosed(3000);
    for (const p of proxies) await waitFor(async () => (await auth(p.address.port, 'fleetuser', 'fpw')).startsWith('-WRONGPASS'), `fleetuser gone from ${p.address.port}`, 3000);
    admin.close();
    onB.close();
  }, 30_000);

  it("the fleet's own keys are refused to clients, in and out of MULTI", async () => {
    const conn = await RawConnection.connect(proxies[0]!.address.port);
    const refused = "-ERR respool: keys under the hash tag {respool-fleet} hold the fleet's shared state (split rules, users, members); clients may not use them\r\n";
    expect(await conn.call('HGETALL', '{respool-fleet}:state')).toBe(refused);
    expect(await conn.call('DEL', '{respool-fleet}:state')).toBe(refused);
    expect(await conn.call('SUNIONSTORE', '{respool-fleet}:x', 'a', 'b')).toBe(refused);
    expect(await conn.call('MULTI')).toBe('+OK\r\n');
    expect(await conn.call('SET', '{respool-fleet}:state', 'x')).toBe(refused);
    expect(await conn.call('EXEC')).toMatch(/^-EXECABORT/);
    expect(await conn.call('SET', 'respool-fleet-not-a-tag', 'x')).toBe('+OK\r\n');
    // A '{' too near the key's end to hold the tag: served, and the proxy keeps serving.
    expect(await conn.call('SET', 'short{key', 'x')).toBe('+OK\r\n');
    expect(await conn.call('SET', 'x{respool-flee', 'y')).toBe('+OK\r\n');
    expect(await conn.call('GET', 'short{key')).toBe('$1\r\nx\r\n');
    conn.close();
  });
});
