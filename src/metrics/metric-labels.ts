/**
 * The bounded label vocabularies of respool's metrics (metric-definitions.ts declares the
 * metrics): every label whose values come from a fixed set is declared here, so every label stays
 * bounded; the hot-path accessors in `metrics.ts` only accept these values.
 */


/** Why a client connection was refused or dropped right after accept. */
export const CONNECTION_REJECT_REASONS = ['max_clients', 'draining', 'error'] as const;
export type ConnectionRejectReason = (typeof CONNECTION_REJECT_REASONS)[number];

/** A fleet member's state (src/fleet/membership.ts). */
export const FLEET_MEMBER_STATES = ['alive', 'suspect', 'joining', 'fail'] as const;

/** How a fill of split copies ended (src/hotkeys/copy-fill.ts). */
export const SPLIT_FILL_OUTCOMES = ['ok', 'aborted', 'failed'] as const;
export type SplitFillOutcome = (typeof SPLIT_FILL_OUTCOMES)[number];

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

export const TOPOLOGY_REFRESH_TRIGGERS = ['startup', 'moved', 'periodic', 'error', 'cutover'] as const;
export type TopologyRefreshTrigger = (typeof TOPOLOGY_REFRESH_TRIGGERS)[number];

export const TOPOLOGY_REFRESH_OUTCOMES = ['ok', 'failed', 'skipped'] as const;
export type TopologyRefreshOutcome = (typeof TOPOLOGY_REFRESH_OUTCOMES)[number];

// resilience (issue 4: src/upstream/circuit-breaker.ts, node-pool.ts, routing/router.ts, server.ts)

/** How a request that was retried at least once finally ended. */
export const RETRY_OUTCOMES = ['ok', 'error'] as const;

/**
 * Why a request was refused with an error instead of being sent (a bound was reached):
 *  - link_inflight: resilience.maxInflightPerLink / maxInflightBytesPerLink
 *  - process_inflight: resilience.maxInflightPerProcess / maxInflightBytesPerProcess
 *  - node_queue: resilience.maxQueuedPerNode / maxQueuedBytesPerNode (waiting for a link)
 *  - node_down: no link to the node within resilience.queueWindowMs
 */
export const SHED_REASONS = ['link_inflight', 'process_inflight', 'node_queue', 'node_down'] as const;
export type ShedReason = (typeof SHED_REASONS)[number];

/** Why respool closed a client connection on its own initiative. */
export const CLIENT_DISCONNECT_REASONS = ['idle_timeout', 'output_buffer', 'drain_deadline', 'pubsub_output', 'max_memory'] as const;

/** Queues whose depth is exported (sampled once a second). */
export const QUEUE_NAMES = ['accept', 'node_wait', 'upstream_inflight', 'client_pending'] as const;

/**
 * Where a read-only command was served, relative to respool's own availability zone:
 *  - same_zone_replica / other_zone_replica: a replica in / outside respool's zone (outside
 *    includes "zone unknown")
 *  - same_zone_primary: azAffinityReplicasAndPrimary's second choice, the primary in respool's zone
 *  - primary_fallback: a replica strategy fell back to the primary (no usable replica)
 *  - primary: the strategy is primary (counted only when some read strategy is configured)
 */
export const READ_OUTCOMES = ['same_zone_replica', 'other_zone_replica', 'same_zone_primary', 'primary_fallback', 'primary'] as const;
export type ReadOutcome = (typeof READ_OUTCOMES)[number];

// leased connections (src/upstream/lease-pools.ts)

/** What a leased upstream connection (or a request for one) is doing; waiting = acquires parked at a bound. */
export const LEASE_STATES = ['in_use', 'idle', 'waiting'] as const;
export type LeaseState = (typeof LEASE_STATES)[number];

/**
 * Why a lease was refused:
 *  - max_per_node / max_total: dedicated.maxPerNode / dedicated.maxTotal stayed reached for
 *    dedicated.acquireTimeoutMs
 *  - upstream_unavailable: dialing the node (connect, handshake) failed
 *  - shutting_down: the pools were closed while the acquire waited
 */
export const LEASE_REFUSAL_REASONS = ['max_per_node', 'max_total', 'upstream_unavailable', 'shutting_down'] as const;
export type LeaseRefusalReason = (typeof LEASE_REFUSAL_REASONS)[number];

// commands over keys in several slots (handlers/cross-slot/transaction-split.ts, handlers/cross-slot/blocking-pops.ts, handlers/cross-slot/reads.ts)

/** What respool did with a MULTI … EXEC (no WATCH) over keys in several slots (transactions.crossSlot). */
export const CROSS_SLOT_TRANSACTION_ACTIONS = ['split', 'refused'] as const;
export type CrossSlotTransactionAction = (typeof CROSS_SLOT_TRANSACTION_ACTIONS)[number];

/**
 * How one slot's MULTI … EXEC block of a split transaction ended:
 *  - ok: EXEC's array came back (its commands ran; some may have failed as commands do)
 *  - aborted: the node refused the block (EXECABORT at EXEC: nothing of it ran)
 *  - connection_lost: the link failed after the block was written (it may or may not have run)
 *  - not_sent: no node for its slot, or the link refused it (nothing of it ran)
 */
export const TRANSACTION_GROUP_OUTCOMES = ['ok', 'aborted', 'connection_lost', 'not_sent'] as const;
export type TransactionGroupOutcome = (typeof TRANSACTION_GROUP_OUTCOMES)[number];

/** Commands over keys in several slots that respool carried out (besides transactions and MGET-style splits). */
export const CROSS_SLOT_COMMAND_KINDS = ['blocking', 'read', 'move'] as const;
export type CrossSlotCommandKind = (typeof CROSS_SLOT_COMMAND_KINDS)[number];

/** A value a losing node of a blocking pop over several slots popped, put back where it came from (ok), or not (failed: logged). */
export const PUT_BACK_OUTCOMES = ['ok', 'failed'] as const;
export type PutBackOutcome = (typeof PUT_BACK_OUTCOMES)[number];

/** Label value for command names outside the known set (keeps `command` bounded). */
export const UNKNOWN_COMMAND_LABEL = 'unknown';
