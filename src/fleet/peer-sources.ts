import { promises as dns } from 'node:dns';
import { isIP } from 'node:net';
import type { HostPort, PeersFrom } from '../config/types.js';

/** Turns a DNS name into the addresses it names now (A and AAAA records). */
export interface PeerResolver {
  resolve(name: string): Promise<string[]>;
}

/**
 * DNS through c-ares (node's dns.Resolver): the system's name servers and search domains from
 * /etc/resolv.conf, or the given servers ("127.0.0.1:5353"). A and AAAA are both asked; a
 * family with no records (ENODATA, ENOTFOUND) is empty, any other failure rejects. A
 * Kubernetes headless Service answers every ready pod's IP (every pod's, with
 * publishNotReadyAddresses).
 */
export function dnsResolver(servers?: readonly string[]): PeerResolver {
  const resolver = new dns.Resolver({ timeout: 2000, tries: 2 });
  if (servers !== undefined) resolver.setServers([...servers]);
  const family = async (ask: () => Promise<string[]>): Promise<string[]> => {
    try {
      return await ask();
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ENODATA' || code === 'ENOTFOUND') return [];
      throw err;
    }
  };
  return {
    async resolve(name) {
      if (isIP(name) !== 0) return [name];
      const [v4, v6] = await Promise.all([family(() => resolver.resolve4(name)), family(() => resolver.resolve6(name))]);
      return [...v4, ...v6];
    },
  };
}

/** The members `peersFrom` names now: each resolved address at its port, in a stable order. */
export async function resolvePeersFrom(from: PeersFrom, resolver: PeerResolver): Promise<HostPort[]> {
  const addresses = await resolver.resolve(from.name);
  return [...new Set(addresses)].sort().map((host) => ({ host, port: from.port }));
}
