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

// ---- the table's constructors -----------------------------------------------------------------
// `const L` keeps each entry's label names as a literal tuple, so MetricLabel<K> stays the union
// of that metric's labels (as `as const` on an object literal would).

/** One table entry of the given type, its label names kept literal. */
export interface TypedMetricDefinition<T extends MetricType, L extends readonly string[]> extends MetricDefinition {
  readonly type: T;
  readonly labelNames: L;
}

function counter<const L extends readonly string[]>(help: string, labelNames: L): TypedMetricDefinition<'counter', L> {
  return { type: 'counter', help, labelNames };
}

function gauge<const L extends readonly string[]>(help: string, labelNames: L): TypedMetricDefinition<'gauge', L> {
  return { type: 'gauge', help, labelNames };
}

function histogram<const L extends readonly string[]>(
  help: string,
  labelNames: L,
  buckets: readonly number[],
): TypedMetricDefinition<'histogram', L> {
  return { type: 'histogram', help, labelNames, buckets };
}

// ---- the table --------------------------------------------------------------------------------

export const METRIC_DEFINITIONS = {
  // clients
  client_connections: gauge('Client connections currently open.', []),
  client_connections_accepted_total: counter('Client connections accepted.', []),
  client_connections_rejected_total: counter('Client connections refused right after accept, by reason.', ['reason']),
  protocol_errors_total: counter('Client connections closed because they sent malformed RESP.', []),

  // upstream links
  upstream_links: gauge('Upstream links currently open, per node, protocol and role.', ['node', 'protocol', 'role']),
  upstream_link_connects_total: counter('Attempts to open an upstream link, per node and outcome.', ['node', 'outcome']),
  upstream_inflight_requests: gauge('Requests written to a node and not yet answered.', ['node']),
  upstream_latency_seconds: histogram('Time from writing a request to a node until its reply arrived, per node.', ['node'], LATENCY_BUCKETS_SECONDS),

  // commands
  commands_total: counter('Commands received from clients, by command name (unknown names count as "unknown").', ['command']),
  command_errors_total: counter('Error replies sent to clients, by command and kind (server|proxy|protocol|timeout|redirect_limit).', ['command', 'kind']),

  // cluster
  redirects_total: counter('MOVED and ASK redirections followed.', ['type']),
  retries_total: counter('Requests sent again after a transient error, by reason.', ['reason']),
  topology_refreshes_total: counter('Cluster topology refreshes, by trigger and outcome.', ['trigger', 'outcome']),
  topology_epoch: gauge('Number of topology snapshots installed since start.', []),
  // resilience
  circuit_state: gauge('Circuit per upstream node: 0 closed, 1 half-open (one probe dial in flight), 2 open (node treated as down).', ['node']),
  circuit_opens_total: counter('Times a node\'s circuit opened after resilience.circuitFailureThreshold consecutive failures.', ['node']),
  dial_budget_exhausted_total: counter('Dials to a failing node deferred because resilience.dialAttemptsPerWindow was spent.', ['node']),
  retry_budget_exhausted_total: counter('Retries refused because the node\'s retry budget (resilience.retryBudgetPercent) was spent.', ['node']),
  retry_outcomes_total: counter('Requests retried at least once, by how they finally ended (ok: a non-error reply).', ['outcome']),
  requests_shed_total: counter('Requests refused with an error because a queue bound was reached or the node stayed down, by reason.', ['reason']),
  client_disconnects_total: counter('Client connections closed by respool (idle timeout, output buffer limit, drain deadline, pub/sub output limit, max_memory: among the clients holding the most output when respool\'s buffers passed limits.maxMemory, internal_error: handling a request failed in respool itself).', ['reason']),
  queue_depth: gauge('Entries in respool\'s queues, sampled each second: accept (new clients waiting for admission), node_wait (requests waiting for a link), upstream_inflight (requests written, unanswered), client_pending (replies owed to clients).', ['queue']),
  upstream_inflight_bytes: gauge('Request bytes written to upstream links and not yet answered, sampled each second.', []),

  // fair admission and lanes (src/client/fair-admission.ts, src/client/lane-class.ts)
  admission_wait_seconds: histogram('How long a client with requests left after its slice waited for its next turn (client/fair-admission.ts), by the lane class it was in (interactive, bulk).', ['class'], LATENCY_BUCKETS_SECONDS),
  admission_backlog_clients: gauge('Clients with requests waiting in their own buffer (for their turn, or for their own replies: the per-client window), by lane class; sampled each second.', ['class']),
  admission_backlog_bytes: gauge('Request bytes waiting in clients\' own buffers to be handed on, by lane class; sampled each second.', ['class']),
  client_buffered_bytes: gauge('What respool holds for its clients, by lane class (interactive, bulk) and kind: output (unread replies, replies waiting behind another) or requests (read, not yet handed on); sampled four times a second.', ['class', 'kind']),
  memory_buffered_bytes: gauge('Everything limits.maxMemory counts: clients\' output and requests plus the shared links\' buffers; sampled four times a second.', []),
  memory_ceiling_bytes: gauge('limits.maxMemory as resolved at start (auto: 75% of the cgroup memory limit less respool\'s start-up footprint); 0 = off.', []),
  upstream_link_inflight_requests: gauge('Requests written on the shared links and not yet answered, per node and lane (interactive links, bulk links); sampled each second.', ['node', 'lane']),

  // leased connections (WATCH transactions, blocking commands)
  leased_connections: gauge('Leased upstream connections per node: in_use (leased to a client, or being handed back), idle (kept for reuse up to dedicated.idleMs), waiting (acquires parked at dedicated.maxPerNode / maxTotal).', ['node', 'state']),
  lease_refusals_total: counter('Requests for a leased upstream connection refused, by reason (max_per_node|max_total|upstream_unavailable|shutting_down).', ['reason']),

  // blocked clients parked at respool (src/parking)
  parked_clients: gauge('Clients blocked in BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP, BZPOPMIN, BZPOPMAX or BZMPOP, parked at respool (no connection of their own on a node).', []),
  park_watch_connections: gauge('Watch connections (CLIENT TRACKING ON, one per node) that hear of changes to the keys parked clients wait on.', []),
  park_wake_seconds: histogram('From a node telling respool that a parked key changed to the value reaching its first waiter, per node.', ['node'], LATENCY_BUCKETS_SECONDS),
  park_put_backs_total: counter('Values popped for a parked client that left in the same instant, put back where they came from (ok) or not (failed: logged with the key).', ['outcome']),

  // users and upstream identities (src/acl)
  upstream_identity_links: gauge("Upstream links authenticated as a user's own identity (users[].upstream, acl.upstream), shared and leased, per respool user; sampled each second. Bounded by the users an operator created.", ['user']),
  acl_denials_total: counter("Commands and AUTH attempts denied by respool's ACL check or by a node checking a user's identity, per user and reason (command|key|channel|auth).", ['user', 'reason']),

  // commands over keys in several slots
  cross_slot_transactions_total: counter('MULTI … EXEC transactions (without WATCH) over keys in several slots: split into one block per slot, or refused with CROSSSLOT (transactions.crossSlot).', ['action']),
  cross_slot_transaction_groups_total: counter('Per-slot MULTI … EXEC blocks of split transactions, by outcome (ok|aborted|connection_lost|not_sent); every outcome but ok is a failed group.', ['outcome']),
  cross_slot_commands_total: counter('Commands over keys in several slots carried out by respool, by kind: blocking (BLPOP, BZPOPMIN, XREAD BLOCK … waiting on every node), read (SUNION, ZINTER, PFCOUNT, XREAD … computed as one server would), move (LMOVE, BLMOVE …).', ['kind']),
  cross_slot_put_backs_total: counter('Values a losing node of a blocking pop over several slots popped in the same instant as the winner, put back where they came from (ok) or not (failed: logged with the key).', ['outcome']),

  slots_covered: gauge('Hash slots (of 16384) served by some node in the current topology.', []),

  // read strategies and availability zones
  reads_total: counter('Read-only commands answered, by read strategy, outcome (same_zone_replica|other_zone_replica|same_zone_primary|primary_fallback|primary), node and the node\'s zone.', ['strategy', 'outcome', 'node', 'zone']),
  zone_info: gauge('respool\'s own availability zone (value 1), and where it came from (config|env|aws|gcp|azure|none).', ['zone', 'source']),

  // hot keys (src/hotkeys): detection per window, split copies
  hotkeys_node_request_share: gauge('Share (0..1) of sampled keyed requests each primary served in the last detection window.', ['node']),
  hotkeys_top_key_share: gauge('Share (0..1) of sampled keyed requests of the top keys in the last detection window (at most hotKeys.detection.topK series, replaced every window).', ['rank', 'key']),
  hotkeys_top_key_requests_per_second: gauge('Estimated requests per second of the top keys in the last detection window (bounded like hotkeys_top_key_share).', ['rank', 'key']),
  hotkeys_requests_per_second: gauge('Estimated keyed requests per second in the last detection window.', []),
  split_keys: gauge('Split keys currently kept in copies.', []),
  split_reads_total: counter('Reads of split keys, by where they were served: copy, original, or fallback (a copy was empty and the original was read).', ['outcome']),
  split_writes_total: counter('Writes fanned out to the copies of split keys, by outcome: ok, failed (every copy refused it), partial_failure.', ['outcome']),
  split_repairs_total: counter('Copies of split keys made equal to the original (placement, missing copy, partial write), by outcome.', ['outcome']),
  split_refused_total: counter('Commands refused because they cannot be applied to a split key (scripts, multi-key writes, random writes).', []),

  // the fleet (src/fleet): membership, shared state, copy fills
  fleet_members: gauge('Members of this instance\'s fleet, itself included, by state: alive, suspect (missed a check, keeps its slots), joining (back, waiting for its slots), fail.', ['state']),
  fleet_state_version: gauge('Version of the fleet-wide runtime state (split rules) this instance has applied (0: none yet, or fleet state off).', []),
  fleet_state_confirmed_age_seconds: gauge('Seconds since this instance last confirmed the fleet state with the upstream (past cluster.fleetLeaseMs writes get TRYAGAIN).', []),
  split_fills_total: counter('Fills of split copies from the original with writes to the key held (placement, maxCopyAge refresh, repair), by outcome: ok, aborted (a member did not confirm the hold, or the deadline passed), failed.', ['outcome']),

  // pub/sub (src/pubsub/hub.ts; sampled from PubSubHub.stats())
  pubsub_subscribers: gauge('Client connections holding or asking for at least one channel, pattern or shard channel.', []),
  pubsub_upstream_channels: gauge('Channels respool holds (or is acquiring) upstream: once each, however many clients hold them.', []),
  pubsub_upstream_patterns: gauge('Patterns respool holds (or is acquiring) upstream: once each, however many clients hold them.', []),
  pubsub_upstream_shard_channels: gauge('Shard channels respool holds (or is acquiring) upstream, each on its slot\'s primary: once each, however many clients hold them.', []),
  pubsub_upstream_connections: gauge('Upstream subscriber connections (the classic one plus one per node holding shard channels).', []),

  // operations (issue 10)
  client_request_duration_seconds: histogram('Time from receiving a request from a client until its reply was written to the client, by command family (keyed, multiKey, allShards, local, ...).', ['family'], CLIENT_LATENCY_BUCKETS_SECONDS),
  client_bytes_total: counter('Bytes on client connections: direction="in" read from clients, "out" replies written to them.', ['direction']),
  upstream_io_total: counter('On the shared upstream links: op="requests" requests written, "writes" write batches (system calls, nearly), "reads" reads that brought replies. requests ÷ writes is how many requests a node reads per read.', ['op']),
  upstream_bytes_total: counter('Bytes on the shared upstream links: direction="out" requests written, "in" replies read.', ['direction']),
  build_info: gauge('Always 1: respool\'s version and the Node.js version running it.', ['version', 'node_version']),
  circuit_status: gauge('Circuit per upstream node as one series per state (closed, half-open, open): 1 for the current state, 0 for the others.', ['node', 'state']),
  // what operators look at (issue 22: src/observe)
  upstream_latency_last_minute_seconds: gauge('Upstream latency per node over the last minute (send → reply) at quantile 0.5, 0.99, 0.999; from respool\'s own histograms, computed at scrape time.', ['node', 'quantile']),
  client_latency_last_minute_seconds: gauge('Client-side latency per command family over the last minute (receive → reply written) at quantile 0.5, 0.99, 0.999.', ['family', 'quantile']),
  node_saturated: gauge('1 while a node is saturated: its upstream p99 over the last minute is above saturation.p99Ms, or its main thread used more than saturation.cpuPercent of a core between two INFO cpu samples.', ['node']),
  nodes_saturated_ratio: gauge('Share (0..1) of the upstream nodes that are saturated (respool_node_saturated): averages hide the few nodes at 100%.', []),
  node_cpu_utilization: gauge('A node\'s main-thread CPU (used_cpu_sys_main_thread + used_cpu_user_main_thread from INFO cpu) per second of wall time between the last two samples, 0..1 of a core.', ['node']),
  slowlog_entries_total: counter('Requests logged by respool\'s own slow log (SLOWLOG / COMMANDLOG slow) and command logs, by log (slow, large-request, large-reply).', ['log']),
  bigkeys_top_key_bytes: gauge('Reply bytes of the largest keys seen in the hot-key sampler\'s sample (at most bigKeys.topK series; the key label only with hotKeys.detection.keyNamesInMetrics, names cut at 100 characters).', ['rank', 'key']),

  // The near cache (config nearCache, src/nearcache): read off its counters at scrape time.
  near_cache_entries: gauge('Entries in the near cache (main upstreams).', []),
  near_cache_bytes: gauge('Bytes the near cache\'s entries hold (key + value + per-entry overhead), at most nearCache.maxBytes.', []),
  near_cache_reads_total: counter('Reads of cached keys: result="hit" answered from memory, "miss" that started a fill, "coalesced" that joined a fill in flight, "passed_on" sent to the node (the fill could not answer them).', ['result']),
  near_cache_invalidations_total: counter('Invalidations the nodes sent the near cache\'s tracking connections.', []),
  near_cache_evictions_total: counter('Entries evicted to keep nearCache.maxBytes.', []),

  // A live migration (RESPOOL MIGRATE, src/migration): read off its status at scrape time.
  migration_state: gauge('1 for the live migration\'s state now (idle, copying, paused, verifying, synced, cutting-over, cut-over, aborted), 0 for the others.', ['state']),
  migration_keys_total: counter('Keys a migration handled: kind="copied" by the scan, "mirrored" client writes carried to the target, "recopied" copies beyond a key\'s first, "deleted" gone from the source when copied, "verified" compared by the verifier, "mismatched" found different (and copied again).', ['kind']),
  migration_bytes_total: counter('DUMP payload bytes a migration restored on the target.', []),
  migration_unseen_writes_per_second: gauge('Writes per second at the migration\'s source that respool did not send (clients connected to the source directly; an estimate from INFO commandstats).', []),
  migration_cutover_pause_seconds: gauge('How long the last cutover held writes.', []),
  migration_pace_keys_per_second: gauge('The keys per second the migration\'s scan may copy now: migration.maxKeysPerSecond, times the share the clients\' p99 allows (migration.paceByLatency).', []),

  // Tenants (config tenants[], src/tenants): tenant-metrics.ts.
  ...TENANT_METRIC_DEFINITIONS,

  config_last_reload_successful: gauge('1 at start and after a SIGHUP reload that applied, 0 after one whose config was rejected (the running config stays).', []),
  config_last_reload_success_timestamp_seconds: gauge('Unix time of the start or of the last reload that applied.', []),
} as const satisfies Record<string, MetricDefinition>;

export type MetricKey = keyof typeof METRIC_DEFINITIONS;

export type MetricLabel<K extends MetricKey> = (typeof METRIC_DEFINITIONS)[K]['labelNames'][number];

/** Full exported name, e.g. `metricName('commands_total') === 'respool_commands_total'`. */
export function metricName(key: MetricKey): string {
  return METRIC_PREFIX + key;
}

/** All declared keys, in table order. */
export const METRIC_KEYS = Object.keys(METRIC_DEFINITIONS) as MetricKey[];
