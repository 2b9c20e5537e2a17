/**
 * The three places an exchange is compared over (issue 28's exactness tests): one valkey-server
 * (the oracle), respool in front of a standalone server, and respool in front of a 3-primary
 * cluster. Each test sends the same exchange to every target and expects the oracle's answer.
 */
import { startCluster, startStandalone, type ValkeyCluster, type ValkeyNode } from '../harness/valkey-processes.js';
import type { RespoolProxy } from '../../src/server.js';
import { startTestProxy, type DeepPartial } from './proxy.js';
import type { RespoolConfig } from '../../src/config/types.js';

export interface OracleTargets {
  /** The oracle: a valkey-server clients reach directly. */
  direct: ValkeyNode;
  /** The standalone server behind the first respool. */
  standalone: ValkeyNode;
  /** The cluster behind the second respool. */
  cluster: ValkeyCluster;
  /** direct, respool/standalone, respool/cluster — in that order. */
  targets: Array<{ name: string; port: number }>;
  stop(): Promise<void>;
}

/** `proxy`: settings both respools run with beside the defaults (startTestProxy's overrides). */
export async function startOracleTargets(options: { replicasPerPrimary: number; proxy?: DeepPartial<RespoolConfig> }): Promise<OracleTargets> {
  const [direct, standalone, cluster] = await Promise.all([startStandalone(), startStandalone(), startCluster({ primaries: 3, replicasPerPrimary: options.replicasPerPrimary })]);
  const proxies: RespoolProxy[] = [];
  try {
    proxies.push(await startTestProxy([standalone], { ...options.proxy, mode: 'standalone' } as never));
    proxies.push(await startTestProxy([cluster.nodes[0]!], options.proxy));
  } catch (err) {
    await Promise.all([...proxies.map((p) => p.close()), direct.stop(), standalone.stop(), cluster.stop()]);
    throw err;
  }
  return {
    direct,
    standalone,
    cluster,
    targets: [
      { name: 'direct', port: direct.port },
      { name: 'respool/standalone', port: proxies[0]!.address.port },
      { name: 'respool/cluster', port: proxies[1]!.address.port },
    ],
    stop: async () => {
      await Promise.all(proxies.map((p) => p.close()));
      await Promise.all([direct.stop(), standalone.stop(), cluster.stop()]);
    },
  };
}
