/**
 * Every metric respool exports, declared as data in one table (in the spirit of twemproxy's
 * `nc_stats.h` and Envoy's `ALL_COMMAND_STATS`). `metrics.ts` builds the prom-client objects
 * from this table; nothing else declares a metric.
 *
 * Keys are the metric names without the `respool_` prefix. Label values that come from a
 * fixed vocabulary are declared in metric-labels.ts, so that every label stays bounded.
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

/** Client-side latency: 50µs … 10s (a blocked BLPOP or a slow fan-out lands in the top buckets). */
export const CLIENT_LATENCY_BUCKETS_SECONDS = [...LATENCY_BUCKETS_SECONDS, 5, 10] as const;

import { TENANT_METRIC_DEFINITIONS } from './tenant-metrics.js';

// The bounded label vocabularies live in metric-labels.ts (re-exported here for the metric table's readers).
export * from './metric-labels.js';

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
  // resilience
  circuit_state: {
    type: 'gauge',
    help: 'Circuit per upstream node: 0 closed, 1 half-open (one probe dial in flight), 2 open (node treated as down).',
    labelNames: ['node'],
  },
  circuit_opens_total: {
    type: 'counter',
    help: 'Times a node\'s circuit opened after resilience.circuitFailureThreshold consecutive failures.',
    labelNames: ['node'],
  },
  dial_budget_exhausted_total: {
    type: 'counter',
    help: 'Dials to a failing node deferred because resilience.dialAttemptsPerWindow was spent.',
    labelNames: ['node'],
  },
  retry_budget_exhausted_total: {
    type: 'counter',
    help: 'Retries refused because the node\'s retry budget (resilience.retryBudgetPercent) was spent.',
    labelNames: ['node'],
  },
  retry_outcomes_total: {
    type: 'counter',
    help: 'Requests retried at least once, by how they finally ended (ok: a non-error reply).',
    labelNames: ['outcome'],
  },
  requests_shed_total: {
    type: 'counter',
    help: 'Requests refused with an error because a queue bound was reached or the node stayed down, by reason.',
    labelNames: ['reason'],
  },
  client_disconnects_total: {
    type: 'counter',
    help: 'Client connections closed by respool (idle timeout, output buffer limit, drain deadline, pub/sub output limit, max_memory: among the clients holding the most output when respool\'s buffers passed limits.maxMemory, internal_error: handling a request failed in respool itself).',
    labelNames: ['reason'],
  },
  queue_depth: {
    type: 'gauge',
    help: 'Entries in respool\'s queues, sampled each second: accept (new clients waiting for admission), node_wait (requests waiting for a link), upstream_inflight (requests written, unanswered), client_pending (replies owed to clients).',
    labelNames: ['queue'],
  },
  upstream_inflight_bytes: {
    type: 'gauge',
    help: 'Request bytes written to upstream links and not yet answered, sampled each second.',
    labelNames: [],
  },

  // fair admission and lanes (src/client/fair-admission.ts, src/client/lane-class.ts)
  admission_wait_seconds: {
    type: 'histogram',
    help: 'How long a client with requests left after its slice waited for its next turn (client/fair-admission.ts), by the lane class it was in (interactive, bulk).',
    labelNames: ['class'],
    buckets: LATENCY_BUCKETS_SECONDS,
  },
  admission_backlog_clients: {
    type: 'gauge',
    help: 'Clients with requests waiting in their own buffer (for their turn, or for their own replies: the per-client window), by lane class; sampled each second.',
    labelNames: ['class'],
  },
  admission_backlog_bytes: {
    type: 'gauge',
    help: 'Request bytes waiting in clients\' own buffers to be handed on, by lane class; sampled each second.',
    labelNames: ['class'],
  },
  client_buffered_bytes: {
    type: 'gauge',
    help: 'What respool holds for its clients, by lane class (interactive, bulk) and kind: output (unread replies, replies waiting behind another) or requests (read, not yet handed on); sampled four times a second.',
    labelNames: ['class', 'kind'],
  },
  memory_buffered_bytes: {
    type: 'gauge',
    help: 'Everything limits.maxMemory counts: clients\' output and requests plus the shared links\' buffers; sampled four times a second.',
    labelNames: [],
  },
  memory_ceiling_bytes: {
    type: 'gauge',
    help: 'limits.maxMemory as resolved at start (auto: 75% of the cgroup memory limit less respool\'s start-up footprint); 0 = off.',
    labelNames: [],
  },
  upstream_link_inflight_requests: {
    type: 'gauge',
    help: 'Requests written on the shared links and not yet answered, per node and lane (interactive links, bulk links); sampled each second.',
    labelNames: ['node', 'lane'],
  },

  // leased connections (WATCH transactions, blocking commands)
  leased_connections: {
    type: 'gauge',
    help: 'Leased upstream connections per node: in_use (leased to a client, or being handed back), idle (kept for reuse up to dedicated.idleMs), waiting (acquires parked at dedicated.maxPerNode / maxTotal).',
    labelNames: ['node', 'state'],
  },
  lease_refusals_total: {
    type: 'counter',
    help: 'Requests for a leased upstream connection refused, by reason (max_per_node|max_total|upstream_unavailable|shutting_down).',
    labelNames: ['reason'],
  },

  // blocked clients parked at respool (src/parking)
  parked_clients: {
    type: 'gauge',
    help: 'Clients blocked in BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP, BZPOPMIN, BZPOPMAX or BZMPOP, parked at respool (no connection of their own on a node).',
    labelNames: [],
  },
  park_watch_connections: {
    type: 'gauge',
    help: 'Watch connections (CLIENT TRACKING ON, one per node) that hear of changes to the keys parked clients wait on.',
    labelNames: [],
  },
  park_wake_seconds: {
    type: 'histogram',
    help: 'From a node telling respool that a parked key changed to the value reaching its first waiter, per node.',
    labelNames: ['node'],
    buckets: LATENCY_BUCKETS_SECONDS,
  },
  park_put_backs_total: {
    type: 'counter',
    help: 'Values popped for a parked client that left in the same instant, put back where they came from (ok) or not (failed: logged with the key).',
    labelNames: ['outcome'],
  },

  // users and upstream identities (src/acl)
  upstream_identity_links: {
    type: 'gauge',
    help: "Upstream links authenticated as a user's own identity (users[].upstream, acl.upstream), shared and leased, per respool user; sampled each second. Bounded by the users an operator created.",
    labelNames: ['user'],
  },
  acl_denials_total: {
    type: 'counter',
    help: "Commands and AUTH attempts denied by respool's ACL check or by a node checking a user's identity, per user and reason (command|key|channel|auth).",
    labelNames: ['user', 'reason'],
  },

  // commands over keys in several slots
  cross_slot_transactions_total: {
    type: 'counter',
    help: 'MULTI … EXEC transactions (without WATCH) over keys in several slots: split into one block per slot, or refused with CROSSSLOT (transactions.crossSlot).',
    labelNames: ['action'],
  },
  cross_slot_transaction_groups_total: {
    type: 'counter',
    help: 'Per-slot MULTI … EXEC blocks of split transactions, by outcome (ok|aborted|connection_lost|not_sent); every outcome but ok is a failed group.',
    labelNames: ['outcome'],
  },
  cross_slot_commands_total: {
    type: 'counter',
    help: 'Commands over keys in several slots carried out by respool, by kind: blocking (BLPOP, BZPOPMIN, XREAD BLOCK … waiting on every node), read (SUNION, ZINTER, PFCOUNT, XREAD … computed as one server would), move (LMOVE, BLMOVE …).',
    labelNames: ['kind'],
  },
  cross_slot_put_backs_total: {
    type: 'counter',
    help: 'Values a losing node of a blocking pop over several slots popped in the same instant as the winner, put back where they came from (ok) or not (failed: logged with the key).',
    labelNames: ['outcome'],
  },

  slots_covered: {
    type: 'gauge',
    help: 'Hash slots (of 16384) served by some node in the current topology.',
    labelNames: [],
  },

  // read strategies and availability zones
  reads_total: {
    type: 'counter',
    help: 'Read-only commands answered, by read strategy, outcome (same_zone_replica|other_zone_replica|same_zone_primary|primary_fallback|primary), node and the node\'s zone.',
    labelNames: ['strategy', 'outcome', 'node', 'zone'],
  },
  zone_info: {
    type: 'gauge',
    help: 'respool\'s own availability zone (value 1), and where it came from (config|env|aws|gcp|azure|none).',
    labelNames: ['zone', 'source'],
  },

  // hot keys (src/hotkeys): detection per window, split copies
  hotkeys_node_request_share: {
    type: 'gauge',
    help: 'Share (0..1) of sampled keyed requests each primary served in the last detection window.',
    labelNames: ['node'],
  },
  hotkeys_top_key_share: {
    type: 'gauge',
    help: 'Share (0..1) of sampled keyed requests of the top keys in the last detection window (at most hotKeys.detection.topK series, replaced every window).',
    labelNames: ['rank', 'key'],
  },
  hotkeys_top_key_requests_per_second: {
    type: 'gauge',
    help: 'Estimated requests per second of the top keys in the last detection window (bounded like hotkeys_top_key_share).',
    labelNames: ['rank', 'key'],
  },
  hotkeys_requests_per_second: {
    type: 'gauge',
    help: 'Estimated keyed requests per second in the last detection window.',
    labelNames: [],
  },
  split_keys: {
    type: 'gauge',
    help: 'Split keys currently kept in copies.',
    labelNames: [],
  },
  split_reads_total: {
    type: 'counter',
    help: 'Reads of split keys, by where they were served: copy, original, or fallback (a copy was empty and the original was read).',
    labelNames: ['outcome'],
  },
  split_writes_total: {
    type: 'counter',
    help: 'Writes fanned out to the copies of split keys, by outcome: ok, failed (every copy refused it), partial_failure.',
    labelNames: ['outcome'],
  },
  split_repairs_total: {
    type: 'counter',
    help: 'Copies of split keys made equal to the original (placement, missing copy, partial write), by outcome.',
    labelNames: ['outcome'],
  },
  split_refused_total: {
    type: 'counter',
    help: 'Commands refused because they cannot be applied to a split key (scripts, multi-key writes, random writes).',
    labelNames: [],
  },

  // the fleet (src/fleet): membership, shared state, copy fills
  fleet_members: {
    type: 'gauge',
    help: 'Members of this instance\'s fleet, itself included, by state: alive, suspect (missed a check, keeps its slots), joining (back, waiting for its slots), fail.',
    labelNames: ['state'],
  },
  fleet_state_version: {
    type: 'gauge',
    help: 'Version of the fleet-wide runtime state (split rules) this instance has applied (0: none yet, or fleet state off).',
    labelNames: [],
  },
  fleet_state_confirmed_age_seconds: {
    type: 'gauge',
    help: 'Seconds since this instance last confirmed the fleet state with the upstream (past cluster.fleetLeaseMs writes get TRYAGAIN).',
    labelNames: [],
  },
  split_fills_total: {
    type: 'counter',
    help: 'Fills of split copies from the original with writes to the key held (placement, maxCopyAge refresh, repair), by outcome: ok, aborted (a member did not confirm the hold, or the deadline passed), failed.',
    labelNames: ['outcome'],
  },

  // pub/sub (src/pubsub/hub.ts; sampled from PubSubHub.stats())
  pubsub_subscribers: {
    type: 'gauge',
    help: 'Client connections holding or asking for at least one channel, pattern or shard channel.',
    labelNames: [],
  },
  pubsub_upstream_channels: {
    type: 'gauge',
    help: 'Channels respool holds (or is acquiring) upstream: once each, however many clients hold them.',
    labelNames: [],
  },
  pubsub_upstream_patterns: {
    type: 'gauge',
    help: 'Patterns respool holds (or is acquiring) upstream: once each, however many clients hold them.',
    labelNames: [],
  },
  pubsub_upstream_shard_channels: {
    type: 'gauge',
    help: 'Shard channels respool holds (or is acquiring) upstream, each on its slot\'s primary: once each, however many clients hold them.',
    labelNames: [],
  },
  pubsub_upstream_connections: {
    type: 'gauge',
    help: 'Upstream subscriber connections (the classic one plus one per node holding shard channels).',
    labelNames: [],
  },

  // operations (issue 10)
  client_request_duration_seconds: {
    type: 'histogram',
    help: 'Time from receiving a request from a client until its reply was written to the client, by command family (keyed, multiKey, allShards, local, ...).',
    labelNames: ['family'],
    buckets: CLIENT_LATENCY_BUCKETS_SECONDS,
  },
  client_bytes_total: {
    type: 'counter',
    help: 'Bytes on client connections: direction="in" read from clients, "out" replies written to them.',
    labelNames: ['direction'],
  },
  upstream_io_total: {
    type: 'counter',
    help: 'On the shared upstream links: op="requests" requests written, "writes" write batches (system calls, nearly), "reads" reads that brought replies. requests ÷ writes is how many requests a node reads per read.',
    labelNames: ['op'],
  },
  upstream_bytes_total: {
    type: 'counter',
    help: 'Bytes on the shared upstream links: direction="out" requests written, "in" replies read.',
    labelNames: ['direction'],
  },
  build_info: {
    type: 'gauge',
    help: 'Always 1: respool\'s version and the Node.js version running it.',
    labelNames: ['version', 'node_version'],
  },
  circuit_status: {
    type: 'gauge',
    help: 'Circuit per upstream node as one series per state (closed, half-open, open): 1 for the current state, 0 for the others.',
    labelNames: ['node', 'state'],
  },
  // what operators look at (issue 22: src/observe)
  upstream_latency_last_minute_seconds: {
    type: 'gauge',
    help: 'Upstream latency per node over the last minute (send → reply) at quantile 0.5, 0.99, 0.999; from respool\'s own histograms, computed at scrape time.',
    labelNames: ['node', 'quantile'],
  },
  client_latency_last_minute_seconds: {
    type: 'gauge',
    help: 'Client-side latency per command family over the last minute (receive → reply written) at quantile 0.5, 0.99, 0.999.',
    labelNames: ['family', 'quantile'],
  },
  node_saturated: {
    type: 'gauge',
    help: '1 while a node is saturated: its upstream p99 over the last minute is above saturation.p99Ms, or its main thread used more than saturation.cpuPercent of a core between two INFO cpu samples.',
    labelNames: ['node'],
  },
  nodes_saturated_ratio: {
    type: 'gauge',
    help: 'Share (0..1) of the upstream nodes that are saturated (respool_node_saturated): averages hide the few nodes at 100%.',
    labelNames: [],
  },
  node_cpu_utilization: {
    type: 'gauge',
    help: 'A node\'s main-thread CPU (used_cpu_sys_main_thread + used_cpu_user_main_thread from INFO cpu) per second of wall time between the last two samples, 0..1 of a core.',
    labelNames: ['node'],
  },
  slowlog_entries_total: {
    type: 'counter',
    help: 'Requests logged by respool\'s own slow log (SLOWLOG / COMMANDLOG slow) and command logs, by log (slow, large-request, large-reply).',
    labelNames: ['log'],
  },
  bigkeys_top_key_bytes: {
    type: 'gauge',
    help: 'Reply bytes of the largest keys seen in the hot-key sampler\'s sample (at most bigKeys.topK series; the key label only with hotKeys.detection.keyNamesInMetrics, names cut at 100 characters).',
    labelNames: ['rank', 'key'],
  },

  // Tenants (config tenants[], src/tenants): tenant-metrics.ts.
  ...TENANT_METRIC_DEFINITIONS,

  config_last_reload_successful: {
    type: 'gauge',
    help: '1 at start and after a SIGHUP reload that applied, 0 after one whose config was rejected (the running config stays).',
    labelNames: [],
  },
  config_last_reload_success_timestamp_seconds: {
    type: 'gauge',
    help: 'Unix time of the start or of the last reload that applied.',
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
