// The settings every other module reads. Built once by parseCommandLine() from defaults, the
// optional YAML file and the command line (in that order; later wins). Values here are already
// converted: sizes in bytes, durations in milliseconds, addresses split into host and port.

import type { HotKeysConfig } from './hot-keys-config.js';
import type { ClientTlsConfig, UpstreamTlsConfig } from './tls-config.js';
import type { UserConfig } from '../acl/users.js';
import type { ColocationRule } from '../keys/colocation.js';
import type { BigKeysConfig, CommandlogConfig, LatencyConfig, SaturationConfig, SlowlogConfig } from './observability-config.js';
export type { BigKeysConfig, CommandlogConfig, LatencyConfig, SaturationConfig, SlowlogConfig } from './observability-config.js';
export type { ClientTlsConfig, UpstreamTlsConfig, TlsVersion } from './tls-config.js';
export type { HotKeysConfig, ReadChoice, SplitRuleConfig } from './hot-keys-config.js';

export interface HostPort {
  host: string; // an IPv6 host is stored without brackets ("::1")
  port: number;
}

export type Mode = 'auto' | 'cluster' | 'standalone';
/** cluster.peersFrom: DNS names whose A/AAAA records are fleet members at `port`. */
export interface PeersFrom {
  kind: 'dns';
  name: string;
  port: number;
}
export type FleetStateMode = 'auto' | 'upstream' | 'off';
export const FLEET_STATE_MODES: readonly FleetStateMode[] = ['auto', 'upstream', 'off'];
export type LogLevel = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace';

export interface RespoolConfig {
  listen: HostPort | null; // default 127.0.0.1:6380; port 0 = pick a free port; null = no TCP listener (`--listen unix:PATH`)
  /** A Unix domain socket clients connect to (sidecars: the app on the same host), beside or instead of `listen`; null = none. */
  unixSocket: string | null;
  /** The Unix socket's permission bits (default 0o660: owner and group). */
  unixSocketMode: number;
  listenTls: HostPort | null; // default null (off): a TLS listener next to `listen` (tls-config.ts)
  tls: ClientTlsConfig; // the TLS listener's certificate, key, client CA (mTLS), versions, ciphers
  upstreamTls: UpstreamTlsConfig; // TLS to the upstream nodes (off by default)
  upstreams: HostPort[]; // required, ≥1 (seeds in cluster mode)
  mode: Mode; // default auto
  admin: HostPort | null; // default null (off); port 0 = pick a free port; a bare port = 127.0.0.1:port
  /** Bearer token for admin mutations (POST/DELETE): admin.token, admin.tokenFile, --admin-token-file or RESPOOL_ADMIN_TOKEN; null = mutations refused (403). */
  adminToken: string | null;
  /** Bearer token for the admin GET endpoints but /metrics, /healthz, /readyz (admin.readToken, admin.readTokenFile); null = they are open. The admin token reads too. */
  adminReadToken: string | null;
  connectionsPerNode: number; // default 2, 1..64
  /** Client-serving processes sharing the listen sockets (src/workers); 'auto' = one per core. Default 1. */
  workers: number | 'auto';
  /**
   * Run the supervisor (src/workers) even with one worker, so SIGUSR2 can replace it without a
   * dropped client (a takeover). Always so with workers > 1. Default false: one process.
   */
  supervised: boolean;
  upstreamAuth: { username: string | null; password: string } | null;
  users: UserConfig[]; // respool's own users: Valkey ACL rules (src/acl/users.ts); empty = no AUTH required
  /** The ACL file, upstream identities, ACL LOG (src/acl). */
  acl: AclConfig;
  limits: {
    maxBulkLength: number;
    maxArrayLength: number;
    maxInlineLength: number;
    maxNestingDepth: number;
    maxPendingPerClient: number; // in-flight requests per client, default 10_000
    maxQueryBytesPerClient: number; // default 1 GiB (Valkey's client-query-buffer-limit)
    maxCrossSlotCopyBytes: number; // default 16 MiB: what one read over keys in several slots may copy to one node (handlers/cross-slot/reads.ts)
    /**
     * The ceiling on what respool buffers — clients' unread replies and queued requests, the links'
     * buffers (client/memory-ceiling.ts): 'auto' (default) = 75% of the cgroup's memory limit less
     * what respool holds at start, off without a limit; a size; 0 = off.
     */
    maxMemory: number | 'auto';
  };
  /** connectMs 2000, commandMs 5000; adminCommandMs 600000: how long a node running SAVE, FLUSHALL … may answer nothing. */
  timeouts: { connectMs: number; commandMs: number; adminCommandMs: number };
  cluster: {
    maxRedirects: number; // default 5
    refreshMinIntervalMs: number; // default 1000
    refreshPeriodMs: number; // default 30_000
    retryBudget: number; // TRYAGAIN/CLUSTERDOWN retries per request, default 3
    retryBaseMs: number; // default 50
    retryMaxMs: number; // default 1000
    /** The host:port respool announces in CLUSTER SLOTS/SHARDS/NODES; null = its listen address (127.0.0.1 for 0.0.0.0 and ::). */
    announce: HostPort | null;
    /** The other respool instances of a fleet (default none): the 16384 slots are divided among the live ones (src/fleet). */
    peers: HostPort[];
    /** More peers from DNS (`dns:NAME:PORT`, e.g. a Kubernetes headless Service), re-resolved every peersResolveMs; null = none. */
    peersFrom: PeersFrom | null;
    peersResolveMs: number; // default 5000
    /** A peer's announce address is asked (CLUSTER MYID) every peerCheckMs, ±50% jitter; default 500. */
    peerCheckMs: number;
    peerCheckTimeoutMs: number; // default 500: an answer later than this counts as none
    /** A peer that has not answered for this long (or refuses connections) is `fail` and loses its slots; default 1500. */
    peerDownAfterMs: number;
    /** A peer back from `fail` must answer for this long before it gets slots again (doubled per flap, at most 8×); default 5000. */
    peerRejoinAfterMs: number;
    /** Where fleet-wide runtime state (split rules, fills, hot-key reports) lives: auto = the upstream when the fleet has peers. */
    fleetState: FleetStateMode;
    /** A member that has not confirmed the fleet state for this long holds back writes (TRYAGAIN) until it has; default 2000. */
    fleetLeaseMs: number;
  };
  logLevel: LogLevel; // default info
  /** Backoff, budgets, circuits and queue bounds toward the upstream (docs/resilience.md). */
  resilience: ResilienceConfig;
  /** Client-side limits: connection storms, idle and slow clients. */
  clients: ClientsConfig;
  /** Where read-only commands go: read strategies and availability-zone affinity (docs/reads.md). */
  reads: ReadsConfig;
  /** Hot-key detection and split copies (src/hotkeys; config in hot-keys-config.ts). */
  hotKeys: HotKeysConfig;
  /** Leased upstream connections (WATCH transactions, blocking commands; src/upstream/lease-pools.ts). */
  dedicated: DedicatedConfig;
  /** Multiplexed pub/sub (src/pubsub). */
  pubsub: PubSubConfig;
  /** Fair admission between clients and their lanes on the shared links (src/client/fair-admission.ts, lane-class.ts). */
  admission: AdmissionConfig;
  /** respool's own slow log (SLOWLOG, COMMANDLOG slow; src/observe). */
  slowlog: SlowlogConfig;
  /** COMMANDLOG large-request / large-reply. */
  commandlog: CommandlogConfig;
  /** Per-command latency histograms (LATENCY HISTOGRAM, INFO latencystats). */
  latency: LatencyConfig;
  /** When a node counts as saturated (respool_nodes_saturated_ratio). */
  saturation: SaturationConfig;
  /** Big keys from the hot-key sampler's sample (RESPOOL BIGKEYS, /bigkeys). */
  bigKeys: BigKeysConfig;
  /** MULTI … EXEC without WATCH over keys in several slots (src/handlers/cross-slot/transaction-split.ts). */
  transactions: TransactionsConfig;
  /** Values of some keys kept in respool's memory, exact by the nodes' invalidations (src/nearcache, docs/near-cache.md). */
  nearCache: NearCacheConfig;
  /** A live migration's target side and pace (src/migration; started by RESPOOL MIGRATE START). */
  migration: MigrationConfig;
  /** Keys stored under one hash tag so they share a slot (src/keys/colocation.ts); empty = names unchanged. */
  colocate: ColocationRule[];
  /** Applications sharing this respool, each with its users' namespace and limits (src/tenants); empty = one default tenant, no limits. */
  tenants: TenantConfig[];
}

/** A live migration (src/migration, docs/migration.md): how respool reaches the target, and how fast it copies. */
export interface MigrationConfig {
  /** The target's credentials; absent: upstreamAuth's; null: no AUTH. */
  upstreamAuth?: { username: string | null; password: string } | null;
  /** TLS to the target; absent: upstreamTls's. */
  upstreamTls?: UpstreamTlsConfig;
  /** The copy's pace at most: keys per second, and DUMP payload bytes per second (the writes' copies are not paced). */
  maxKeysPerSecond: number;
  maxBytesPerSecond: number;
  /** Slow the copy while it costs this process's clients more than maxP99RisePercent on their p99 (src/migration/latency-guard.ts). */
  paceByLatency: boolean;
  /** How far the clients' p99 may rise over their p99 in the minute before START, in percent (20: to 1.2×). */
  maxP99RisePercent: number;
  /** A key whose DUMP payload is bigger is copied in parts (GETRANGE/APPEND, HSCAN/HSET …) rather than by one RESTORE; keep it below the target's proto-max-bulk-len. */
  maxPayloadBytes: number;
  /** Keys per SCAN of the source. */
  batchKeys: number;
  /** Keys the scan copies at once, started together (one write to each node), the pace's wait between groups: a trickle of small groups rather than a batch's burst that clients' requests queue behind. */
  copiesInFlight: number;
  /** Keys the verifier compares once the copy is done (a sample of all the copied keys). */
  verifySample: number;
  /** How long the cutover may hold writes while the writes in flight drain; past it the cutover gives up (writes go on to the source). */
  cutoverMaxPauseMs: number;
  /** After the cutover, writes are carried back to the source for this long, so that ABORT can switch back with nothing lost; 0: no rollback. */
  rollbackWindowMs: number;
  /** Where progress is saved, so that a restarted respool goes on with the copy; beside it (`….upstreams.json`), where a cutover moved the upstreams, followed at a restart (no credentials are written). */
  stateFile: string;
}

export type NearCacheConfirm = 'auto' | 'always' | 'never';
export const NEAR_CACHE_CONFIRM: readonly NearCacheConfirm[] = ['auto', 'always', 'never'];

/** The near cache (src/nearcache/near-cache.ts). */
export interface NearCacheConfig {
  /** Globs over key names as the nodes store them; a key that matches one is cached. Empty: no cache. */
  keys: string[];
  /** Also cache the keys hot-key detection ranks in its top keys (hotKeys.detection), each window's anew. */
  hot: boolean;
  /**
   * Identical reads of keys the cache does not hold, arriving while their twin is in flight to the
   * node, are answered from its reply (same request, protocol, database and identity). Not with
   * confirm on: a read may only be answered by a node read made after it arrived.
   */
  coalesceAll: boolean;
  /**
   * Hits wait for a PING on their node's tracking connection, so that a write acknowledged
   * anywhere before the read arrived (another worker or fleet member, a client on the node) is
   * never followed by an older value: always, never, or auto = when respool is more than one
   * process (workers, supervised, a fleet). Writes through this process are exact either way.
   */
  confirm: NearCacheConfirm;
  /** Bytes all entries may hold together (key + value + per-entry overhead); the least recently used go first. */
  maxBytes: number;
  /** A value (with its key and overhead) larger than this is never cached. */
  maxEntryBytes: number;
  /** An entry older than this is read again from its node, whatever the invalidations said; 0 = no bound. */
  maxAgeMs: number;
}

/** One tenant (docs/tenants.md): its users (users[].tenant) share its namespace and its limits. */
export interface TenantConfig {
  /** Letters, digits, `_`, `-`, `.`: it names the tenant in metrics and RESPOOL TENANTS. */
  name: string;
  /** The namespace of its users (users[].keyPrefix for each of them), or null. */
  keyPrefix: string | null;
  /** Its own cluster or server (tenants[].upstreams), or null: the main upstreams. */
  upstream: TenantUpstream | null;
  limits: TenantLimits;
  /** Higher is slowed later when a node saturates (src/tenants/tenant-shedding.ts); default 0. */
  priority?: number;
}

/** A tenant's own upstreams: what the main ones take from upstreams, mode, upstreamAuth and upstreamTls. */
export interface TenantUpstream {
  upstreams: HostPort[];
  mode: Mode;
  upstreamAuth: { username: string | null; password: string } | null;
  upstreamTls: UpstreamTlsConfig;
}

/** Null: no limit. */
export interface TenantLimits {
  /** Requests handed on per second, over all its clients; past it respool reads less from them. */
  opsPerSecond: number | null;
  /** Request bytes read plus reply bytes written per second, over all its clients; the same back-pressure. */
  bytesPerSecond: number | null;
  /** Its clients at once (connections authenticated as its users); the next gets Valkey's max-clients error. */
  maxClients: number | null;
  /** Replies its clients are owed at once; past it their next requests wait. */
  maxInflight: number | null;
}

/** split: one MULTI … EXEC block per slot (atomic per slot, not across); refuse: CROSSSLOT, as a cluster node answers. */
export type CrossSlotTransactions = 'split' | 'refuse';
export const CROSS_SLOT_TRANSACTIONS: readonly CrossSlotTransactions[] = ['split', 'refuse'];

export interface TransactionsConfig {
  crossSlot: CrossSlotTransactions; // default split: what an application written for one server expects
}

export type AclUpstreamMode = 'none' | 'mirror' | 'auto';
export const ACL_UPSTREAM_MODES: readonly AclUpstreamMode[] = ['auto', 'mirror', 'none'];

export interface AclConfig {
  /** Valkey's aclfile format: ACL LOAD / ACL SAVE, read at start and at every reload; null = none. */
  file: string | null;
  /**
   * Who restricted users without users[].upstream run as on the nodes: none (respool's own user),
   * mirror (a user with the same rules respool keeps on every node), or auto (default): mirror when
   * respool's own identity may manage ACL users on the nodes (checked at start and at every
   * discovery), none with a warning where it may not.
   */
  upstream: AclUpstreamMode;
  /** The name prefix of mirrored users on the nodes; default "respool.". */
  mirrorPrefix: string;
  /** What mirrored users' passwords derive from (a fleet shares it); null = upstreamAuth's password, else one per process. */
  mirrorSecret: string | null;
  /** ACL LOG's length (Valkey's acllog-max-len); default 128. */
  logMaxLen: number;
}

export interface DedicatedConfig {
  maxPerNode: number; // default 1000: leased connections to one node at once (per protocol and database)
  maxTotal: number; // default 10000: leased connections of the whole process
  acquireTimeoutMs: number; // default 1000: wait for a lease at the bound before the client gets an error
  idleMs: number; // default 30000: an idle leased connection kept this long for reuse, then closed
  blockMarginMs: number; // default 5000: a blocking command's lease deadline is its own timeout plus this
  maxReplicaStreams: number; // default 4: clients attached with SYNC / PSYNC at once (each makes every primary save a snapshot)
  parkPops: boolean; // default true: list and sorted-set blocking pops wait at respool (src/parking), not on a leased connection each
}

export interface AdmissionConfig {
  /** Requests one client hands on per turn (default 64), and their bytes (default 16 KiB, Valkey's per-read slice). */
  sliceRequests: number;
  sliceBytes: number;
  /** Requests one client may have owed at once on the shared links (default 128): a deep pipeline waits in its own buffer. */
  maxInflightPerClient: number;
  /** Reply bytes one client may have coming at once, by its average reply size (default 2 MiB). */
  maxInflightReplyBytesPerClient: number;
  /** Links per node (and protocol, role, database) for bulk clients — deep pipelines, big replies, slow readers; default 1, 0 = none (they share the others). */
  bulkConnectionsPerNode: number;
}

export interface PubSubConfig {
  maxOutputBytesPerClient: number; // default 32 MiB (Valkey's client-output-buffer-limit pubsub hard limit)
}

export type ReadStrategyName = 'primary' | 'preferReplica' | 'azAffinity' | 'azAffinityReplicasAndPrimary';
export const READ_STRATEGIES: readonly ReadStrategyName[] = ['primary', 'preferReplica', 'azAffinity', 'azAffinityReplicasAndPrimary'];
export type ZoneFrom = 'off' | 'aws' | 'gcp' | 'azure';
export const ZONE_FROM: readonly ZoneFrom[] = ['off', 'aws', 'gcp', 'azure'];

export interface ReadsConfig {
  strategy: ReadStrategyName; // default primary: every command to the slot's primary
  zone: string | null; // respool's own availability zone; null = RESPOOL_ZONE, else zoneFrom
  zoneFrom: ZoneFrom; // default off: ask a cloud's instance metadata service at start (opt-in)
  metadataBaseUrl: string | null; // required with zoneFrom (no built-in address, so nothing is contacted by accident)
  metadataTimeoutMs: number; // default 1000: the whole metadata lookup, start-up never waits longer
  maxReplicaLagBytes: number; // default 0 (off): skip replicas trailing their primary by more bytes
  prefixes: Array<{ prefix: string; strategy: ReadStrategyName }>; // per key prefix; the longest match wins
}

export interface ResilienceConfig {
  backoffBaseMs: number; // default 100: first reconnect delay ceiling (full jitter)
  backoffCapMs: number; // default 5000: largest reconnect delay
  dialAttemptsPerWindow: number; // default 10: dials to a failing node per window, all links together
  dialWindowMs: number; // default 15000 (Valkey's default cluster-node-timeout)
  retryBudgetPercent: number; // default 10: retries per node as a share of its recent requests
  retryBudgetMinPerSecond: number; // default 10: retries always allowed per node and second
  circuitFailureThreshold: number; // default 3: consecutive failures that open a node's circuit
  queueWindowMs: number; // default 250: how long a request waits for a link to a node that has none
  maxQueuedPerNode: number; // default 10000: requests waiting for a link, per pool
  maxQueuedBytesPerNode: number; // default 64 MiB
  maxInflightPerLink: number; // default 10000: requests written and unanswered, per link
  maxInflightBytesPerLink: number; // default 64 MiB
  maxInflightPerProcess: number; // default 200000: all links together
  maxInflightBytesPerProcess: number; // default 512 MiB
}

export interface ClientsConfig {
  maxClients: number; // default 10000; the excess client gets an error reply, then is closed
  acceptRatePerSecond: number; // default 20000; 0 = unlimited; new clients above it wait, established ones are served first
  idleTimeoutMs: number; // default 0 (off): close clients idle this long
  maxOutputBytesPerClient: number; // default 64 MiB: a client whose unread replies exceed it is closed
  outputStallMs: number; // default 10000: closed too when its unread replies stay above half the limit this long
  tcpKeepAliveMs: number; // default 300000 (Valkey's tcp-keepalive 300); 0 = off
  /**
   * Whose scripts' commands count in CLIENT LIST / INFO tot-cmds, as Valkey counts them: each
   * script call then reads the node's count before and after it (two CLIENT INFO on its link;
   * scripts/command-count-probe.ts). self (default): a client's once it has asked CLIENT INFO
   * itself; always: every client's; never: none (the script itself counts once).
   */
  scriptCommandCounts: ScriptCommandCounts;
}

export type ScriptCommandCounts = 'self' | 'always' | 'never';
export const SCRIPT_COMMAND_COUNTS: readonly ScriptCommandCounts[] = ['self', 'always', 'never'];

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
