/**
 * Three tenants on one respool (issue 31): `teama` (a:) and `teamb` (b:) share the main upstreams
 * as namespaces, `own` has upstreams of its own (tenants[].upstreams: its own pools, topology and
 * identity, backend.ts). Standalone (a server each) and cluster (3+3 shared, 3 primaries of its
 * own): each tenant's users see and touch only their own keys and channels through keys, scans,
 * scripts, SORT patterns, pub/sub, blocking pops and FLUSHALL, and the own tenant's keys land only
 * on its upstreams. Also: a client cannot carry a subscription to other upstreams by AUTH, and a
 * tenant whose upstreams are down gets CLUSTERDOWN while the others are served.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Valkey } from 'iovalkey';
import { freePort, startCluster, startStandalone, type ValkeyCluster, type ValkeyNode } from '../harness/valkey-processes.js';
import type { RespoolConfig, TenantConfig } from '../../src/config/types.js';
import { DEFAULT_UPSTREAM_TLS } from '../../src/config/tls-config.js';
import type { RespoolProxy } from '../../src/server.js';
import { clientFor, startTestProxy } from '../helpers/proxy.js';
import { RawConnection } from '../helpers/raw-resp.js';
import { waitFor } from '../helpers/wait.js';

const NO_LIMITS: TenantConfig['limits'] = { opsPerSecond: null, bytesPerSecond: null, maxClients: null, maxInflight: null };

function tenantsWith(own: Array<{ host: string; port: number }>): TenantConfig[] {
  return [
    { name: 'teama', keyPrefix: 'a:', upstream: null, limits: NO_LIMITS },
    { name: 'teamb', keyPrefix: 'b:', upstream: null, limits: NO_LIMITS },
    { name: 'own', keyPrefix: null, upstream: { upstreams: own, mode: 'auto', upstreamAuth: null, upstreamTls: { ...DEFAULT_UPSTREAM_TLS } }, limits: NO_LIMITS },
  ];
}
const users = [
  { name: 'default', rules: 'on >adminpw +@all ~* &* +@respool-admin' },
  { name: 'alice', password: 'pa', tenant: 'teama' },
  { name: 'bob', password: 'pb', tenant: 'teamb' },
  { name: 'olga', password: 'po', tenant: 'own' },
] as unknown as RespoolConfig['users'];
const PASSWORDS: Record<string, string> = { alice: 'pa', bob: 'pb', olga: 'po' };

/** Every key stored on these nodes, sorted. */
async function storedKeys(nodes: ValkeyNode[]): Promise<string[]> {
  const out: string[] = [];
  for (const n of nodes) out.push(...((await n.call('KEYS', '*')) as string[]));
  return out.sort();
}

describe('tenants with upstreams of their own', () => {
  let shared: ValkeyNode;
  let ownServer: ValkeyNode;
  let sharedCluster: ValkeyCluster;
  let ownCluster: ValkeyCluster;
  const proxies: RespoolProxy[] = [];
  const clients: Valkey[] = [];

  beforeAll(async () => {
    [shared, ownServer, sharedCluster, ownCluster] = await Promise.all([
      startStandalone(), startStandalone(), startCluster({ primaries: 3, replicasPerPrimary: 1 }), startCluster({ primaries: 3, replicasPerPrimary: 0 }),
    ]);
  }, 120_000);

  afterAll(async () => {
    for (const c of clients) c.disconnect();
    await Promise.all(proxies.map((p) => p.close()));
    await Promise.all([shared?.stop(), ownServer?.stop(), sharedCluster?.stop(), ownCluster?.stop()]);
  });

  const as = (proxy: RespoolProxy, user: string) => {
    const c = clientFor(proxy, { username: user, password: PASSWORDS[user]! });
    clients.push(c);
    return c;
  };

  const layouts = [
    {
      name: 'standalone',
      main: () => [{ host: shared.host, port: shared.port }],
      own: () => [{ host: ownServer.host, port: ownServer.port }],
      mainNodes: async () => [shared],
      ownNodes: async () => [ownServer],
    },
    {
      name: 'cluster',
      main: () => [{ host: sharedCluster.nodes[0]!.host, port: sharedCluster.nodes[0]!.port }],
      own: () => [{ host: ownCluster.nodes[0]!.host, port: ownCluster.nodes[0]!.port }],
      mainNodes: () => sharedCluster.primaries(),
      ownNodes: () => ownCluster.primaries(),
    },
  ];

  for (const layout of layouts) {
    describe(layout.name, () => {
      let proxy: RespoolProxy;
      let mainNodes: ValkeyNode[];
      let ownNodes: ValkeyNode[];

      beforeAll(async () => {
        proxy = await startTestProxy(layout.main(), { users, tenants: tenantsWith(layout.own()) } as Partial<RespoolConfig>);
        proxies.push(proxy);
        mainNodes = await layout.mainNodes();
        ownNodes = await layout.ownNodes();
        await Promise.all([...mainNodes, ...ownNodes].map((n) => n.call('FLUSHALL')));
      }, 60_000);

      it('keys, scans, scripts and SORT patterns: each tenant sees only its own; the own tenant\'s keys land only on its upstreams', async () => {
        const tenants = { alice: as(proxy, 'alice'), bob: as(proxy, 'bob'), olga: as(proxy, 'olga') };
        for (const [user, c] of Object.entries(tenants)) {
          await c.set('k1', user);
          await c.mset('k2', `${user}2`, 'k3', `${user}3`); // over several slots in a cluster
          await c.rpush('{s}list', '2', '1', '3');
          await c.mset('{s}w_1', '30', '{s}w_2', '10', '{s}w_3', '20', '{s}o_1', `${user}-one`, '{s}o_2', `${user}-two`, '{s}o_3', `${user}-three`);
          await c.eval("return redis.call('SET', KEYS[1], ARGV[1])", 1, 'scripted', `${user}-s`);
        }
        for (const [user, c] of Object.entries(tenants)) {
          expect(await c.mget('k1', 'k2', 'k3', 'scripted')).toEqual([user, `${user}2`, `${user}3`, `${user}-s`]);
          expect(await c.eval("return redis.call('GET', KEYS[1])", 1, 'k1')).toBe(user);
          // SORT … BY and GET patterns read the tenant's own weights and objects
          expect(await c.sort('{s}list', 'BY', '{s}w_*', 'GET', '{s}o_*')).toEqual([`${user}-two`, `${user}-three`, `${user}-one`]);
          const names = ['k1', 'k2', 'k3', 'scripted', '{s}list', '{s}w_1', '{s}w_2', '{s}w_3', '{s}o_1', '{s}o_2', '{s}o_3'].sort();
          expect((await c.keys('*')).sort(), user).toEqual(names);
          const scanned = new Set<string>();
          let cursor = '0';
          do {
            const [next, batch] = await c.scan(cursor, 'COUNT', 100);
            for (const k of batch) scanned.add(k);
            cursor = next;
          } while (cursor !== '0');
          expect([...scanned].sort(), user).toEqual(names);
          expect(await c.dbsize(), user).toBe(names.length);
        }
        // Where the keys are: a: and b: on the main upstreams, the own tenant's on its own only.
        const main = await storedKeys(mainNodes);
        expect(main.filter((k) => !k.startsWith('a:') && !k.startsWith('b:'))).toEqual([]);
        expect(main.length).toBe(22);
        expect(await storedKeys(ownNodes)).toEqual(['k1', 'k2', 'k3', 'scripted', '{s}list', '{s}o_1', '{s}o_2', '{s}o_3', '{s}w_1', '{s}w_2', '{s}w_3']);
      }, 60_000);

      it('pub/sub and blocking pops: a tenant hears and pops only its own', async () => {
        const listeners = { alice: as(proxy, 'alice'), bob: as(proxy, 'bob'), olga: as(proxy, 'olga') };
        const heard: Record<string, string[]> = { alice: [], bob: [], olga: [] };
        for (const [user, c] of Object.entries(listeners)) {
          c.on('message', (channel: string, message: string) => heard[user]!.push(`${channel}=${message}`));
          await c.subscribe('news');
        }
        const senders = { alice: as(proxy, 'alice'), bob: as(proxy, 'bob'), olga: as(proxy, 'olga') };
        for (const [user, c] of Object.entries(senders)) expect(await c.publish('news', `from-${user}`)).toBe(1);
        await waitFor(() => Object.values(heard).every((h) => h.length >= 1), 'each tenant\'s message');
        await new Promise((r) => setTimeout(r, 100)); // nothing else arrives
        expect(heard).toEqual({ alice: ['news=from-alice'], bob: ['news=from-bob'], olga: ['news=from-olga'] });

        // A blocked pop wakes for its own tenant's push only.
        const poppers = { alice: as(proxy, 'alice'), bob: as(proxy, 'bob'), olga: as(proxy, 'olga') };
        const pops = Object.fromEntries(Object.entries(poppers).map(([user, c]) => [user, c.blpop('{q}jobs', 5)]));
        await new Promise((r) => setTimeout(r, 200));
        await senders.olga.rpush('{q}jobs', 'olga-job');
        expect(await pops.olga).toEqual(['{q}jobs', 'olga-job']);
        await senders.bob.rpush('{q}jobs', 'bob-job');
        await senders.alice.rpush('{q}jobs', 'alice-job');
        expect(await pops.bob).toEqual(['{q}jobs', 'bob-job']);
        expect(await pops.alice).toEqual(['{q}jobs', 'alice-job']);
      }, 30_000);

      it("FLUSHALL empties only the tenant's own keys", async () => {
        const alice = as(proxy, 'alice');
        const bob = as(proxy, 'bob');
        const olga = as(proxy, 'olga');
        await Promise.all([alice.set('f', 'a'), bob.set('f', 'b'), olga.set('f', 'o')]);
        expect(await olga.flushall()).toBe('OK');
        expect(await storedKeys(ownNodes)).toEqual([]);
        expect(await alice.get('f')).toBe('a');
        expect(await bob.get('f')).toBe('b');
        expect(await alice.flushall()).toBe('OK');
        expect(await bob.get('f')).toBe('b');
        expect((await storedKeys(mainNodes)).every((k) => k.startsWith('b:'))).toBe(true);
        expect(await olga.dbsize()).toBe(0);
      }, 30_000);

      it('AUTH moves a client to its tenant\'s upstreams; a client holding a subscription is told to reconnect', async () => {
        const conn = await RawConnection.connect(proxy.address.port);
        try {
          expect(await conn.call('AUTH', 'alice', 'pa')).toBe('+OK\r\n');
          expect(await conn.call('SET', 'moved', 'by-alice')).toBe('+OK\r\n');
          expect(await conn.call('AUTH', 'olga', 'po')).toBe('+OK\r\n'); // now on the own upstreams
          expect(await conn.call('GET', 'moved')).toBe('$-1\r\n');
          expect(await conn.call('SET', 'moved', 'by-olga')).toBe('+OK\r\n');
          expect(await conn.call('AUTH', 'bob', 'pb')).toBe('+OK\r\n'); // back on the main ones
          expect(await conn.call('GET', 'moved')).toBe('$-1\r\n');
          expect(await conn.call('HELLO', '3')).toContain('proto');
          await conn.call('SUBSCRIBE', 'x');
          expect(await conn.call('AUTH', 'olga', 'po')).toBe('-ERR respool: user olga is in tenant own, whose keys are on other upstreams: AUTH as olga on a connection with no subscriptions, transaction, WATCH or tracking\r\n');
          expect(await conn.call('AUTH', 'alice', 'pa')).toBe('+OK\r\n'); // the same upstreams: allowed
        } finally {
          conn.close();
        }
        expect(await as(proxy, 'olga').get('moved')).toBe('by-olga');
        expect(await as(proxy, 'alice').get('moved')).toBe('by-alice');
      }, 30_000);
    });
  }

  it("a tenant whose upstreams cannot be reached: its clients get CLUSTERDOWN, the others are served, RESPOOL TENANTS names its upstreams", async () => {
    const nowhere = [{ host: '127.0.0.1', port: await freePort() }];
    const proxy = await startTestProxy([{ host: shared.host, port: shared.port }], { users, tenants: tenantsWith(nowhere), timeouts: { connectMs: 300 } } as Partial<RespoolConfig>);
    proxies.push(proxy);
    const conn = await RawConnection.connect(proxy.address.port);
    try {
      expect(await conn.call('AUTH', 'olga', 'po')).toBe('+OK\r\n');
      expect(await conn.call('GET', 'x')).toMatch(/^-CLUSTERDOWN /);
      expect(await as(proxy, 'bob').set('x', '1')).toBe('OK');
      expect(await conn.call('AUTH', 'default', 'adminpw')).toBe('+OK\r\n');
      expect(await conn.call('RESPOOL', 'TENANTS')).toContain(`$9\r\nupstreams\r\n$${`127.0.0.1:${nowhere[0]!.port}`.length}\r\n127.0.0.1:${nowhere[0]!.port}\r\n`);
    } finally {
      conn.close();
    }
  }, 30_000);
});
