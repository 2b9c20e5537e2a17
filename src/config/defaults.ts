import type { RespoolConfig } from './types.js';
import { DEFAULT_HOT_KEYS } from './hot-keys-config.js';
import { DEFAULT_CLIENT_TLS, DEFAULT_UPSTREAM_TLS } from './tls-config.js';
import { DEFAULT_BIG_KEYS, DEFAULT_COMMANDLOG, DEFAULT_LATENCY, DEFAULT_SATURATION, DEFAULT_SLOWLOG } from './observability-config.js';

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
  unixSocket: null, // no Unix socket
  unixSocketMode: 0o660,
  listenTls: null, // no TLS listener
  tls: { ...DEFAULT_CLIENT_TLS },
  upstreamTls: { ...DEFAULT_UPSTREAM_TLS },
  upstreams: [],
  mode: 'auto',
  admin: null,
  adminToken: null, // admin mutations refused until a token is configured
  adminReadToken: null, // admin GET endpoints open
  connectionsPerNode: 2,
  workers: 1,
  supervised: false, // one process; SIGUSR2 (a takeover) needs the supervisor
  upstreamAuth: null,
  users: [],
  acl: { file: null, upstream: 'auto', mirrorPrefix: 'respool.', mirrorSecret: null, logMaxLen: 128 },
  limits: {
    maxBulkLength: 512 * MiB, // Valkey's proto-max-bulk-len
    maxArrayLength: 1_048_576,
    maxInlineLength: 64 * KiB,
    maxNestingDepth: 128,
    maxPendingPerClient: 10_000,
    maxQueryBytesPerClient: 1 * GiB, // Valkey's client-query-buffer-limit
    maxCrossSlotCopyBytes: 16 * MiB, // inputs a read over several slots copies to one node (DUMP payloads)
    maxMemory: 'auto', // 75% of the container's memory limit, less respool's own footprint; off without a limit
  },
  timeouts: { connectMs: 2000, commandMs: 5000, adminCommandMs: 600_000 }, // SAVE of a big data set takes its time, as on Valkey
  cluster: {
    maxRedirects: 5,
    refreshMinIntervalMs: 1000,
    refreshPeriodMs: 30_000,
    retryBudget: 3,
    retryBaseMs: 50,
    retryMaxMs: 1000,
    announce: null, // the listen address (127.0.0.1 when listening on 0.0.0.0 or ::)
    peers: [],
    peersFrom: null, // static peers only
    peersResolveMs: 5_000,
    peerCheckMs: 500, // a dead member's slots move within peerDownAfterMs + one check (< 3 s)
    peerCheckTimeoutMs: 500,
    peerDownAfterMs: 1_500,
    peerRejoinAfterMs: 5_000,
    fleetState: 'auto', // the upstream holds it when the fleet has peers
    fleetLeaseMs: 2_000,
  },
  logLevel: 'info',
  resilience: {
    backoffBaseMs: 100, // AWS guidance for Lettuce: base 100 ms, cap 5 s
    backoffCapMs: 5_000,
    dialAttemptsPerWindow: 10, // Valkey PR #2154: ~10 attempts per cluster-node-timeout
    dialWindowMs: 15_000, // Valkey's default cluster-node-timeout
    retryBudgetPercent: 10,
    retryBudgetMinPerSecond: 10,
    circuitFailureThreshold: 3,
    queueWindowMs: 250,
    maxQueuedPerNode: 10_000,
    maxQueuedBytesPerNode: 64 * MiB,
    maxInflightPerLink: 10_000,
    maxInflightBytesPerLink: 64 * MiB,
    maxInflightPerProcess: 200_000,
    maxInflightBytesPerProcess: 512 * MiB,
  },
  clients: {
    maxClients: 10_000, // Valkey's maxclients
    acceptRatePerSecond: 20_000,
    idleTimeoutMs: 0, // Valkey's timeout 0
    maxOutputBytesPerClient: 64 * MiB,
    outputStallMs: 10_000, // like Valkey's soft client-output-buffer-limit seconds
    tcpKeepAliveMs: 300_000, // Valkey's tcp-keepalive 300
    scriptCommandCounts: 'self', // two CLIENT INFO per script call: only for a client that looks at its own count
  },
  reads: {
    strategy: 'primary',
    zone: null,
    zoneFrom: 'off', // never contacts a metadata service unless the operator opts in
    metadataBaseUrl: null,
    metadataTimeoutMs: 1000,
    maxReplicaLagBytes: 0,
    prefixes: [],
  },
  hotKeys: structuredClone(DEFAULT_HOT_KEYS),
  dedicated: {
    maxPerNode: 1000,
    maxTotal: 10_000,
    acquireTimeoutMs: 1000,
    idleMs: 30_000,
    blockMarginMs: 5_000,
    maxReplicaStreams: 4,
    parkPops: true,
  },
  pubsub: {
    maxOutputBytesPerClient: 32 * MiB, // Valkey's client-output-buffer-limit pubsub 32mb
  },
  admission: {
    sliceRequests: 64,
    sliceBytes: 16 * KiB, // Valkey reads 16 KiB of a client per read event (PROTO_IOBUF_LEN)
    maxInflightPerClient: 128,
    maxInflightReplyBytesPerClient: 2 * MiB,
    bulkConnectionsPerNode: 1,
  },
  nearCache: {
    keys: [], // nothing cached until keys are named
    hot: false,
    coalesceAll: false, // the cached keys' reads coalesce always; others cost a lookup per read
    confirm: 'auto', // exact across workers and fleet members; a lone process needs no PING
    maxBytes: 64 * MiB,
    maxEntryBytes: 1 * MiB,
    maxAgeMs: 10_000, // as hotKeys.maxCopyAge: what a missed invalidation could leave stale
  },
  migration: {
    maxKeysPerSecond: 5_000, // bench:migration: clients' p99 rises with respool's CPU per copied key (docs/migration.md)
    maxBytesPerSecond: 32 * MiB, // a quarter of a 1 Gbit/s link
    paceByLatency: true, // the pace above is a ceiling; the clients' p99 sets the pace below it
    maxP99RisePercent: 20,
    maxPayloadBytes: 256 * MiB, // half Valkey's proto-max-bulk-len: RESTORE's argument
    batchKeys: 100,
    copiesInFlight: 4,
    verifySample: 1_000,
    cutoverMaxPauseMs: 2_000,
    rollbackWindowMs: 0, // the source is left as it was at the cutover
    stateFile: 'respool-migration.json', // in the working directory
  },
  colocate: [], // key names as the client says them
  tenants: [], // every user in the default tenant: no namespace beyond users[].keyPrefix, no limits
  transactions: {
    crossSlot: 'split', // an application written for one server expects its transactions to run
  },
  slowlog: { ...DEFAULT_SLOWLOG }, // Valkey's slowlog-log-slower-than 10000, slowlog-max-len 128
  commandlog: { ...DEFAULT_COMMANDLOG }, // Valkey 8.1's commandlog-*-larger-than 1048576, max-len 128
  latency: { ...DEFAULT_LATENCY }, // Valkey's latency-tracking yes
  saturation: { ...DEFAULT_SATURATION },
  bigKeys: { ...DEFAULT_BIG_KEYS },
});

function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object') {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}
