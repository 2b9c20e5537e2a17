import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { Valkey, type RedisOptions } from 'iovalkey';
import { DEFAULT_CONFIG } from '../../src/config/defaults.js';
import type { RespoolConfig } from '../../src/config/types.js';
import { startProxy, type RespoolProxy, type StartOptions } from '../../src/server.js';

let proxiesStarted = 0;

export type DeepPartial<T> = { [K in keyof T]?: T[K] extends object ? DeepPartial<T[K]> : T[K] };

/** Starts respool in-process on a free port (or `overrides.listen`) in front of `upstreams`. */
export async function startTestProxy(
  upstreams: Array<{ host: string; port: number }>,
  overrides: DeepPartial<RespoolConfig> = {},
  start: Omit<StartOptions, 'log'> = {},
): Promise<RespoolProxy> {
  const base = structuredClone(DEFAULT_CONFIG) as RespoolConfig;
  const config: RespoolConfig = {
    ...base,
    ...(overrides as Partial<RespoolConfig>),
    listen: overrides.listen ?? { host: '127.0.0.1', port: 0 }, // a fixed port for fleets whose peers must know it
    upstreams,
    limits: { ...base.limits, ...(overrides.limits ?? {}) },
    timeouts: { ...base.timeouts, ...(overrides.timeouts ?? {}) },
    cluster: { ...base.cluster, ...(overrides.cluster ?? {}) },
    resilience: { ...base.resilience, ...(overrides.resilience ?? {}) },
    clients: { ...base.clients, ...(overrides.clients ?? {}) },
    reads: { ...base.reads, ...(overrides.reads ?? {}) },
    dedicated: { ...base.dedicated, ...(overrides.dedicated ?? {}) },
    admission: { ...base.admission, ...(overrides.admission ?? {}) },
    // A migration's saved state: a file of this proxy's own unless the test names one (a restart that resumes).
    // Tests copy at the pace they set: the latency guard would follow the test machine's noise
    // (migration-pace.test.ts turns it on).
    migration: { ...base.migration, stateFile: join(tmpdir(), `respool-test-migration-${process.pid}-${++proxiesStarted}.json`), paceByLatency: false, ...(overrides.migration ?? {}) },
  } as RespoolConfig;
  const log = pino({ level: process.env['RESPOOL_TEST_LOG'] ?? 'silent' });
  return startProxy(config, { ...start, log });
}

/**
 * One member of a fleet on 127.0.0.1: respool listening on `port`, with every one of `ports` as
 * its cluster.peers (itself included, as a fleet's members are configured alike).
 */
export function startFleetMember(
  upstreams: Array<{ host: string; port: number }>,
  ports: number[],
  port: number,
  overrides: DeepPartial<RespoolConfig> = {},
): Promise<RespoolProxy> {
  const at = (p: number) => ({ host: '127.0.0.1', port: p });
  return startTestProxy(upstreams, { ...overrides, listen: at(port), cluster: { ...overrides.cluster, peers: ports.map(at) } as never });
}

/** An iovalkey client (a plain, non-cluster client) pointed at the proxy. */
export function clientFor(proxy: RespoolProxy, options: RedisOptions = {}): Valkey {
  return new Valkey({
    host: proxy.address.host,
    port: proxy.address.port,
    maxRetriesPerRequest: 0,
    enableOfflineQueue: true,
    lazyConnect: false,
    ...options,
  });
}
