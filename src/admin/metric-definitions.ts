/**
 * Every metric respool exports, declared as data in one table (in the spirit of twemproxy's
 * `nc_stats.h` and Envoy's `ALL_COMMAND_STATS`). `metrics.ts` builds the prom-client objects
 * from this table; nothing else declares a metric.
 *
 * Keys are the metric names without the `respool_` prefix. Label values that come from a
 * fixed vocabulary are declared here too (the `*_VALUES` arrays) so that every label stays
 * bounded; the hot-path accessors in `metrics.ts` only accept these values.
 */

export const METRIC_PREFIX = 'respool_';

export type MetricType = 'counter' | 'gauge' | 'histogram';

export interface MetricDefinition {
  readonly type: MetricType;
  readonly help: string;
  readonly labelNames: readonly string[];
  /** Histograms only: upper bounds in seconds (or the metric's unit). */
  readonly buckets?: readonly number[];
}

/** Upstream latency buckets: 50 µs … 2.5 s. */
export const LATENCY_BUCKETS_SECONDS = [
  0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
  2.5,
] as const;

// ---- bounded label vocabularies -------------------------------------------------------------

/** Why a client connection was refused or dropped right after accept. */
export const CONNECTION_REJECT_REASONS = ['max_clients', 'draining', 'error'] as const;
export type ConnectionRejectReason = (typeof CONNECTION_REJECT_REASONS)[number];

/** Protocol spoken on an upstream link (the client's protocol, see design invariant 5). */
export const LINK_PROTOCOLS = ['resp2', 'resp3'] as const;
export type LinkProtocol = (typeof LINK_PROTOCOLS)[number];

/** What an upstream link is used for. */
export const LINK_ROLES = ['primary', 'replica', 'dedicated'] as const;
export type LinkRole = (typeof LINK_ROLES)[number];

/** Result of one attempt to open an upstream link (connect + handshake). */
export const LINK_CONNECT_OUTCOMES = ['ok', 'failed', 'timeout'] as const;
export type LinkConnectOutcome = (typeof LINK_CONNECT_OUTCOMES)[number];

/**
 * Who is to blame for an error reply:
 *  - server: the upstream answered with an error (WRONGTYPE, ERR ...)
 *  - proxy: respool could not serve it (no link, unsupported, limits)
 *  - protocol: malformed request/reply
 *  - timeout: no reply within timeouts.commandMs
 *  - redirect_limit: more than cluster.maxRedirects MOVED/ASK hops
 */
export const COMMAND_ERROR_KINDS = ['server', 'proxy', 'protocol', 'timeout', 'redirect_limit'] as const;
export type CommandErrorKind = (typeof COMMAND_ERROR_KINDS)[number];

export const REDIRECT_TYPES = ['moved', 'ask'] as const;
export type RedirectType = (typeof REDIRECT_TYPES)[number];

/** Why a request was sent again (bounded by cluster.retryBudget). */
export const RETRY_REASONS = ['tryagain', 'clusterdown', 'loading', 'masterdown', 'connection'] as const;
export type RetryReason = (typeof RETRY_REASONS)[number];

export const TOPOLOGY_REFRESH_TRIGGERS = ['startup', 'moved', 'periodic', 'error'] as const;
export type TopologyRefreshTrigger = (typeof TOPOLOGY_REFRESH_TRIGGERS)[number];

export const TOPOLOGY_REFRESH_OUTCOMES = ['ok', 'failed', 'skipped'] as const;
export type TopologyRefreshOutcome = (typeof TOPOLOGY_REFRESH_OUTCOMES)[number];

/** Label value for command names outside the known set (keeps `command` bounded). */
export const UNKNOWN_COMMAND_LABEL = 'unknown';

// ---- the table --------------------------------------------------------------------------------

export const METRIC_DEFINITIONS = {
  // clients
  client_connections: {
    type: 'gauge',
    help: 'Client connections currently open.',
    labelNames: [],
  },
  client_connections_accepted_total: {
    type: 'counter',
    help: 'Client connections accepted.',
    labelNames: [],
  },
  client_connections_rejected_total: {
    type: 'counter',
    help: 'Client connections refused right after accept, by reason.',
    labelNames: ['reason'],
  },
  protocol_errors_total: {
    type: 'counter',
    help: 'Client connections closed because they sent malformed RESP.',
    labelNames: [],
  },

  // upstream links
  upstream_links: {
    type: 'gauge',
    help: 'Upstream links currently open, per node, protocol and role.',
    labelNames: ['node', 'protocol', 'role'],
  },
  upstream_link_connects_total: {
    type: 'counter',
    help: 'Attempts to open an upstream link, per node and outcome.',
    labelNames: ['node', 'outcome'],
  },
  upstream_inflight_requests: {
    type: 'gauge',
    help: 'Requests written to a node and not yet answered.',
    labelNames: ['node'],
  },
  upstream_latency_seconds: {
    type: 'histogram',
    help: 'Time from writing a request to a node until its reply arrived, per node.',
    labelNames: ['node'],
    buckets: LATENCY_BUCKETS_SECONDS,
  },

  // commands
  commands_total: {
    type: 'counter',
    help: 'Commands received from clients, by command name (unknown names count as "unknown").',
    labelNames: ['command'],
  },
  command_errors_total: {
    type: 'counter',
    help: 'Error replies sent to clients, by command and kind (server|proxy|protocol|timeout|redirect_limit).',
    labelNames: ['command', 'kind'],
  },

  // cluster
  redirects_total: {
    type: 'counter',
    help: 'MOVED and ASK redirections followed.',
    labelNames: ['type'],
  },
  retries_total: {
    type: 'counter',
    help: 'Requests sent again after a transient error, by reason.',
    labelNames: ['reason'],
  },
  topology_refreshes_total: {
    type: 'counter',
    help: 'Cluster topology refreshes, by trigger and outcome.',
    labelNames: ['trigger', 'outcome'],
  },
  topology_epoch: {
    type: 'gauge',
    help: 'Number of topology snapshots installed since start.',
    labelNames: [],
  },
  slots_covered: {
    type: 'gauge',
    help: 'Hash slots (of 16384) served by some node in the current topology.',
    labelNames: [],
  },
} as const satisfies Record<string, MetricDefinition>;

export type MetricKey = keyof typeof METRIC_DEFINITIONS;

export type MetricLabel<K extends MetricKey> = (typeof METRIC_DEFINITIONS)[K]['labelNames'][number];

/** Full exported name, e.g. `metricName('commands_total') === 'respool_commands_total'`. */
export function metricName(key: MetricKey): string {
  return METRIC_PREFIX + key;
}

/** All declared keys, in table order. */
export const METRIC_KEYS = Object.keys(METRIC_DEFINITIONS) as MetricKey[];
