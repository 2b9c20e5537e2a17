import type { RespoolConfig } from './types.js';

const KiB = 1024;
const MiB = 1024 * KiB;
const GiB = 1024 * MiB;

/**
 * Every default in one place (docs/contracts.md). `upstreams` is empty here because it has no
 * default: parseCommandLine() requires --upstream or `upstreams:` in the file.
 * Frozen; parseCommandLine() always returns fresh objects.
 */
export const DEFAULT_CONFIG: Readonly<RespoolConfig> = deepFreeze({
  listen: { host: '127.0.0.1', port: 6380 },
  upstreams: [],
  mode: 'auto',
  admin: null,
  connectionsPerNode: 2,
  upstreamAuth: null,
  users: [],
  limits: {
    maxBulkLength: 512 * MiB, // Valkey's proto-max-bulk-len
    maxArrayLength: 1_048_576,
    maxInlineLength: 64 * KiB,
    maxNestingDepth: 128,
    maxPendingPerClient: 10_000,
    maxQueryBytesPerClient: 1 * GiB, // Valkey's client-query-buffer-limit
  },
  timeouts: { connectMs: 2000, commandMs: 5000 },
  cluster: {
    maxRedirects: 5,
    refreshMinIntervalMs: 1000,
    refreshPeriodMs: 30_000,
    retryBudget: 3,
    retryBaseMs: 50,
    retryMaxMs: 1000,
  },
  logLevel: 'info',
});

function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object') {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}
