// Fleet members from DNS (cluster.peersFrom: dns:NAME:PORT): three in-process respool instances on
// 127.0.0.1/.2/.3, one port, whose peer name is answered by a DNS server on loopback that the test
// controls; membership follows its answers as they change.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, startCluster, type ValkeyCluster } from '../harness/valkey-processes.js';
import type { RespoolProxy } from '../../src/server.js';
import { dnsResolver, resolvePeersFrom } from '../../src/fleet/peer-sources.js';
import { startTestProxy } from '../helpers/proxy.js';
import { TestDnsServer } from '../helpers/dns-server.js';
import { waitFor } from '../helpers/wait.js';

const NAME = 'respool-peers.fleet.test';

describe('fleet members from DNS', () => {
  let dns: TestDnsServer;
  let cluster: ValkeyCluster;
  let port: number;
  const proxies: RespoolProxy[] = [];
  const hosts = ['127.0.0.1', '127.0.0.2', '127.0.0.3'];

  /** The addresses one instance counts as members (itself included), sorted. */
  const membersOf = (p: RespoolProxy) => p.membership!.members().map((m) => m.address).sort();
  const liveOf = (p: RespoolProxy) => p.membership!.members().filter((m) => m.state === 'alive').map((m) => m.address).sort();

  beforeAll(async () => {
    dns = await TestDnsServer.start();
    cluster = await startCluster({ primaries: 3, replicasPerPrimary: 0 });
    port = await freePort();
    dns.set(NAME, hosts.slice(0, 2));
    const seed = [{ host: cluster.nodes[0]!.host, port: cluster.nodes[0]!.port }];
    for (const host of hosts) {
      proxies.push(await startTestProxy(seed, {
        listen: { host, port },
        cluster: { peersFrom: { kind: 'dns', name: NAME, port }, peersResolveMs: 200, peerCheckMs: 100 } as never,
      }, { peerResolver: dnsResolver([dns.address]) }));
    }
  }, 60_000);

  afterAll(async () => {
    await Promise.all(proxies.map((p) => p.close()));
    await cluster?.stop();
    await dns?.close();
  });

  it('resolves A and AAAA records through the resolver, at the given port; an unknown name is an error', async () => {
    dns.set('both.fleet.test', ['10.1.0.2', '10.1.0.1', 'fd00::7']);
    const found = await resolvePeersFrom({ kind: 'dns', name: 'both.fleet.test', port: 6380 }, dnsResolver([dns.address]));
    expect(found).toEqual([{ host: '10.1.0.1', port: 6380 }, { host: '10.1.0.2', port: 6380 }, { host: 'fd00::7', port: 6380 }]);
    dns.set('empty.fleet.test', []);
    expect(await resolvePeersFrom({ kind: 'dns', name: 'empty.fleet.test', port: 1 }, dnsResolver([dns.address]))).toEqual([]);
  });

  it('the members are the addresses the name resolves to, and follow its answers', async () => {
    const addr = (h: string) => `${h}:${port}`;
    // .1 and .2 are named: they see each other; .3 is not named: it sees itself and them.
    await waitFor(() => liveOf(proxies[0]!).length === 2 && liveOf(proxies[1]!).length === 2, 'the two named members to see each other');
    expect(membersOf(proxies[0]!)).toEqual([addr(hosts[0]!), addr(hosts[1]!)]);
    expect(membersOf(proxies[2]!)).toEqual(hosts.map(addr));

    // The name gains .3: every member takes it in within a resolve period or two.
    dns.set(NAME, hosts);
    await waitFor(() => proxies.every((p) => liveOf(p).length === 3), 'every member to see three', 3000);
    const slots = (p: RespoolProxy) => JSON.stringify(p.membership!.liveIds().sort());
    expect(slots(proxies[0]!)).toBe(slots(proxies[1]!));

    // The name drops .2 (a pod removed from the Service): .1 and .3 let it go, though it still answers.
    dns.set(NAME, [hosts[0]!, hosts[2]!]);
    await waitFor(() => !membersOf(proxies[0]!).includes(addr(hosts[1]!)) && !membersOf(proxies[2]!).includes(addr(hosts[1]!)), 'the dropped address to leave', 3000);
    expect(liveOf(proxies[0]!)).toEqual([addr(hosts[0]!), addr(hosts[2]!)]);

    // DNS failing (SERVFAIL): the members known so far stay.
    dns.failing = true;
    const asked = dns.queries.get(NAME.toLowerCase()) ?? 0;
    await waitFor(() => (dns.queries.get(NAME.toLowerCase()) ?? 0) > asked + 4, 'a few failed resolutions', 3000);
    expect(liveOf(proxies[0]!)).toEqual([addr(hosts[0]!), addr(hosts[2]!)]);
    dns.failing = false;
    // An answer with no records: no other members.
    dns.set(NAME, []);
    await waitFor(() => membersOf(proxies[0]!).length === 1, 'an empty answer to leave only the member itself', 3000);
    expect(proxies[0]!.membership!.liveIds()).toHaveLength(1);
  });
});
