// The settings every other module reads. Built once by parseCommandLine() from defaults, the
// optional YAML file and the command line (in that order; later wins). Values here are already
// converted: sizes in bytes, durations in milliseconds, addresses split into host and port.

export interface HostPort {
  host: string; // an IPv6 host is stored without brackets ("::1")
  port: number;
}

export type Mode = 'auto' | 'cluster' | 'standalone';
export type LogLevel = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace';

export interface RespoolConfig {
  listen: HostPort; // default 127.0.0.1:6380; port 0 = pick a free port
  upstreams: HostPort[]; // required, ≥1 (seeds in cluster mode)
  mode: Mode; // default auto
  admin: HostPort | null; // default null (off); port 0 = pick a free port
  connectionsPerNode: number; // default 2, 1..64
  upstreamAuth: { username: string | null; password: string } | null;
  users: Array<{ name: string; password: string }>; // respool's own ACL; empty = no AUTH required
  limits: {
    maxBulkLength: number;
    maxArrayLength: number;
    maxInlineLength: number;
    maxNestingDepth: number;
    maxPendingPerClient: number; // in-flight requests per client, default 10_000
    maxQueryBytesPerClient: number; // default 1 GiB (Valkey's client-query-buffer-limit)
  };
  timeouts: { connectMs: number; commandMs: number }; // defaults 2000, 5000
  cluster: {
    maxRedirects: number; // default 5
    refreshMinIntervalMs: number; // default 1000
    refreshPeriodMs: number; // default 30_000
    retryBudget: number; // TRYAGAIN/CLUSTERDOWN retries per request, default 3
    retryBaseMs: number; // default 50
    retryMaxMs: number; // default 1000
  };
  logLevel: LogLevel; // default info
}

export const MODES: readonly Mode[] = ['auto', 'cluster', 'standalone'];
export const LOG_LEVELS: readonly LogLevel[] = ['fatal', 'error', 'warn', 'info', 'debug', 'trace'];

/**
 * A bad command line or config file. The message names the offending flag or field, one problem
 * per line; `problems` holds the same lines separately. The CLI prints the message and exits 2.
 */
export class ConfigError extends Error {
  readonly problems: readonly string[];
  constructor(message: string, problems?: readonly string[]) {
    super(message);
    this.name = 'ConfigError';
    this.problems = problems ?? [message];
  }
}
