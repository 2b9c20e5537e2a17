/**
 * The process's metrics, built from the table in `metric-definitions.ts`.
 *
 * Each `Metrics` instance owns a private prom-client `Registry` (never the global one), so
 * tests can create as many as they like. Hot-path callers should fetch a labelled child once
 * (e.g. `metrics.commandCounter('get')`, `metrics.latencyHistogram(node)`) and reuse it; every
 * accessor caches its children, so even calling it per request does only a Map lookup and never
 * builds a label object.
 *
 * Cardinality: every label is bounded. Fixed vocabularies come from the `*_VALUES` arrays in
 * the definitions; the `command` label is limited to known command names (see `commandLabel`);
 * `node` is bounded by the topology, and `forgetNode` drops a node's series when it leaves.
 */
import type { Counter, Gauge, Registry } from 'prom-client';
import { PromCounter, PromGauge, PromRegistry, collectDefaultMetrics } from './prom-client-parts.js';
import { LabeledHistogram, type HistogramSeries } from './fast-histogram.js';
import { RESPOOL_VERSION } from '../own-files.js';
import { LatencyWindows, type WindowedHistogram } from './latency-windows.js';
import type { RecentLatency } from './recent-latency.js';
import { tenantsAtScrape, type TenantFigures } from './tenant-metrics.js';

export type { TenantFigures } from './tenant-metrics.js';

/** A histogram series that also records into a last-minute window (RESPOOL LATENCY, saturation). */
class WindowedSeries implements HistogramSeries {
  constructor(
    private readonly series: HistogramSeries,
    private readonly window: WindowedHistogram,
    /** The data families' requests also go to the last minute's one-second slots (a migration's pace). */
    private readonly recent: RecentLatency | null,
  ) {}

  observe(seconds: number): void {
    this.series.observe(seconds);
    const ms = seconds * 1000;
    this.window.recordMs(ms);
    this.recent?.recordMs(ms);
  }
}

/** The families whose requests are the clients' data requests (what a migration's pace guards: recent-latency.ts). */
const DATA_FAMILIES: ReadonlySet<string> = new Set(['keyed', 'multiKey', 'script']);

/** One `respool_commands_total` series, counted as a plain number on the hot path. */
export class CommandCount {
  value = 0;
  inc(by = 1): void {
    this.value += by;
  }
}

import {
  COMMAND_ERROR_KINDS,
  CONNECTION_REJECT_REASONS,
  CROSS_SLOT_COMMAND_KINDS,
  CROSS_SLOT_TRANSACTION_ACTIONS,
  PUT_BACK_OUTCOMES,
  TRANSACTION_GROUP_OUTCOMES,
  FLEET_MEMBER_STATES,
  SPLIT_FILL_OUTCOMES,
  LEASE_REFUSAL_REASONS,
  METRIC_DEFINITIONS,
  METRIC_KEYS,
  REDIRECT_TYPES,
  RETRY_REASONS,
  TOPOLOGY_REFRESH_OUTCOMES,
  TOPOLOGY_REFRESH_TRIGGERS,
  UNKNOWN_COMMAND_LABEL,
  metricName,
  type CommandErrorKind,
  type ConnectionRejectReason,
  type CrossSlotCommandKind,
  type CrossSlotTransactionAction,
  type PutBackOutcome,
  type TransactionGroupOutcome,
  type LeaseRefusalReason,
  type LeaseState,
  type LinkConnectOutcome,
  type LinkProtocol,
  type LinkRole,
  type MetricKey,
  type MetricLabel,
  type MetricDefinition,
  type RedirectType,
  type RetryReason,
  type TopologyRefreshOutcome,
  type TopologyRefreshTrigger,
} from './metric-definitions.js';

type Def<K extends MetricKey> = (typeof METRIC_DEFINITIONS)[K];

/** The prom-client object type a table entry turns into. */
export type PromMetric<K extends MetricKey> = Def<K>['type'] extends 'counter'
  ? Counter<MetricLabel<K>>
  : Def<K>['type'] extends 'gauge'
    ? Gauge<MetricLabel<K>>
    : LabeledHistogram;

/** Every declared metric, by table key (without the `respool_` prefix). */
export type MetricHandles = { readonly [K in MetricKey]: PromMetric<K> };

export interface MetricsOptions {
  /**
   * Lower-case command names allowed as `command` label values (e.g. every name of the
   * CommandTable, including "client|setname"-style subcommands). Anything else is counted as
   * "unknown". When omitted, any well-formed lower-case name is accepted until
   * `maxCommandLabels` distinct names have been seen.
   */
  knownCommands?: Iterable<string>;
  /** Safety cap on distinct `command` label values when `knownCommands` is not given. Default 512. */
  maxCommandLabels?: number;
  /** Register prom-client's default process metrics (prefix respool_). Default true. */
  defaultMetrics?: boolean;
}

const DEFAULT_MAX_COMMAND_LABELS = 512;
/** Shape of a Valkey command name as the caller passes it: lower case, optional "|sub". */
const COMMAND_NAME_RE = /^[a-z][a-z0-9_-]{0,63}(?:\|[a-z0-9_-]{1,64})?$/;

/**
 * Maps a lower-case command name to a bounded label value: the name itself when it is in
 * `known`, otherwise "unknown".
 */
export function commandLabelFor(name: string, known: ReadonlySet<string>): string {
  return known.has(name) ? name : UNKNOWN_COMMAND_LABEL;
}

function buildMetric(key: MetricKey, def: MetricDefinition, registry: Registry): unknown {
  const common = {
    name: metricName(key),
    help: def.help,
    labelNames: [...def.labelNames],
    registers: [registry],
  };
  switch (def.type) {
    case 'counter':
      return new PromCounter(common);
    case 'gauge':
      return new PromGauge(common);
    case 'histogram':
      // one label at most (see fast-histogram.ts for why not prom-client's Histogram)
      return new LabeledHistogram(common.name, common.help, common.labelNames[0] ?? 'node', [...(def.buckets ?? [])], [registry]);
  }
}

function preset<V extends string, C>(values: readonly V[], make: (v: V) => C): Record<V, C> {
  const out = {} as Record<V, C>;
  for (const v of values) out[v] = make(v);
  return out;
}

interface NodeSeries<C> {
  readonly node: string;
  readonly values: string[];
  readonly child: C;
}

/** Sets what prom-client runs when the registry is read (the metric's value copied from its owner then). */
function collect(metric: unknown, fn: () => void): void {
  (metric as { collect: () => void }).collect = fn;
}

/** Every state a migration reports (migration/migration.ts MigrationPhase): each a series of respool_migration_state. */
const MIGRATION_STATES = ['idle', 'copying', 'paused', 'verifying', 'synced', 'cutting-over', 'cut-over', 'aborted'] as const;

export class Metrics {
  /** The private registry holding every respool metric (and the default process metrics). */
  readonly registry: Registry;
  /** Raw prom-client objects by table key, for anything the accessors below do not cover. */
  readonly raw: MetricHandles;

  // label-less metrics: use directly (.inc(), .dec(), .set())
  readonly clientConnections: Gauge;
  readonly clientConnectionsAccepted: Counter;
  readonly protocolErrors: Counter;
  readonly topologyEpoch: Gauge;
  readonly slotsCovered: Gauge;

  // fixed-vocabulary children, created (and exported as 0) up front
  private readonly rejected: Record<ConnectionRejectReason, Counter.Internal>;
  private readonly redirects: Record<RedirectType, Counter.Internal>;
  private readonly retries: Record<RetryReason, Counter.Internal>;
  private readonly refreshes: Record<TopologyRefreshTrigger, Record<TopologyRefreshOutcome, Counter.Internal>>;
  private readonly leaseRefusals: Record<LeaseRefusalReason, Counter.Internal>;
  /** Commands over keys in several slots (handlers/cross-slot/transaction-split.ts, handlers/cross-slot/blocking-pops.ts, handlers/cross-slot/reads.ts). */
  readonly crossSlotTransactions: Record<CrossSlotTransactionAction, Counter.Internal>;
  readonly crossSlotTransactionGroups: Record<TransactionGroupOutcome, Counter.Internal>;
  readonly crossSlotCommands: Record<CrossSlotCommandKind, Counter.Internal>;
  readonly crossSlotPutBacks: Record<PutBackOutcome, Counter.Internal>;
  /** Blocked clients parked at respool (src/parking). */
  readonly parkedClients: Gauge;
  readonly parkWatchConnections: Gauge;
  readonly parkPutBacks: Record<PutBackOutcome, Counter.Internal>;

  // command-labelled children, keyed by label value (bounded)
  private knownCommands: Set<string> | null;
  private readonly maxCommandLabels: number;
  private readonly seenCommands = new Set<string>();
  /** `respool_commands_total` children: plain numbers per label, copied into the metric at scrape time. */
  private readonly commandCounts = new Map<string, CommandCount>();
  /** respool_split_reads_total by outcome: plain numbers on the hot path (one per split read), read at scrape time. */
  readonly splitReads = { original: 0, copy: 0, fallback: 0 };
  private readonly commandErrors = new Map<string, Record<CommandErrorKind, Counter.Internal | undefined>>();

  // node-labelled children
  private readonly latency = new Map<string, HistogramSeries>();
  private readonly inflight = new Map<string, Gauge.Internal<'node'>>();
  private readonly links = new Map<string, NodeSeries<Gauge.Internal<'node' | 'protocol' | 'role'>>>();
  private readonly connects = new Map<string, NodeSeries<Counter.Internal>>();
  private readonly leased = new Map<string, NodeSeries<Gauge.Internal<'node' | 'state'>>>();

  /** Client bytes, added to by every session (plain numbers: no metric call per chunk). */
  readonly traffic = { clientIn: 0, clientOut: 0 };
  /** The shared links' byte totals (UpstreamPools' ProcessLoad), set by server.ts. */
  upstreamTraffic: { readonly sentBytes: number; readonly receivedBytes: number; readonly sentRequests: number; readonly reads: number; writes(): number } | null = null;
  private readonly clientLatencyByFamily = new Map<string, HistogramSeries>();
  /** Last-minute latency per node and per family, fed by the two histograms below. */
  readonly windows = new LatencyWindows();

  /** `respool_client_request_duration_seconds{family}` series (cached: one Map lookup), also the family's last minute. */
  clientLatency(family: string): HistogramSeries {
    let series = this.clientLatencyByFamily.get(family);
    if (series === undefined) {
      series = new WindowedSeries(this.raw.client_request_duration_seconds.labels(family), this.windows.family(family), DATA_FAMILIES.has(family) ? this.windows.recent : null);
      this.clientLatencyByFamily.set(family, series);
    }
    return series;
  }

  /** `respool_circuit_status{node,state}`: 1 for `state`, 0 for the other two. */
  setCircuitStatus(node: string, state: 'closed' | 'half-open' | 'open'): void {
    for (const s of ['closed', 'half-open', 'open'] as const) this.raw.circuit_status.labels(node, s).set(s === state ? 1 : 0);
  }

  constructor(opts: MetricsOptions = {}) {
    this.registry = new PromRegistry();
    const raw: Record<string, unknown> = {};
    for (const key of METRIC_KEYS) raw[key] = buildMetric(key, METRIC_DEFINITIONS[key], this.registry);
    this.raw = raw as MetricHandles;

    // prom-client's process metrics under their standard names (process_cpu_seconds_total,
    // process_resident_memory_bytes, nodejs_eventloop_lag_seconds, ...), as every Node.js exporter.
    if (opts.defaultMetrics ?? true) collectDefaultMetrics({ register: this.registry });
    this.raw.build_info.labels(RESPOOL_VERSION, process.version).set(1);
    // Counters kept as plain numbers on the hot path (bytes, split reads, upstream I/O): copied
    // into the metric at scrape time, one child per key of what `read` returns.
    const counterFrom = (c: Counter<string>, read: () => Record<string, number>) => {
      collect(c, () => {
        const v = read();
        c.reset();
        for (const label in v) c.labels(label).inc(v[label]!);
      });
    };
    collect(this.raw.commands_total, () => {
      const c = this.raw.commands_total;
      c.reset();
      for (const [label, count] of this.commandCounts) c.labels(label).inc(count.value);
    });
    counterFrom(this.raw.split_reads_total, () => this.splitReads);
    counterFrom(this.raw.client_bytes_total, () => ({ in: this.traffic.clientIn, out: this.traffic.clientOut }));
    // Last-minute quantiles, computed from the windows at scrape time (metrics/latency-windows.ts).
    const quantiles = (gauge: Gauge<string>, summaries: () => Array<{ name: string; calls: number; p50Us: number; p99Us: number; p999Us: number }>) => {
      collect(gauge, () => {
        gauge.reset();
        for (const s of summaries()) {
          if (s.calls === 0) continue;
          gauge.labels(s.name, '0.5').set(s.p50Us / 1e6);
          gauge.labels(s.name, '0.99').set(s.p99Us / 1e6);
          gauge.labels(s.name, '0.999').set(s.p999Us / 1e6);
        }
      });
    };
    quantiles(this.raw.upstream_latency_last_minute_seconds as Gauge<string>, () => this.windows.nodeSummaries());
    quantiles(this.raw.client_latency_last_minute_seconds as Gauge<string>, () => this.windows.familySummaries());
    counterFrom(this.raw.upstream_bytes_total, () => ({ in: this.upstreamTraffic?.receivedBytes ?? 0, out: this.upstreamTraffic?.sentBytes ?? 0 }));
    counterFrom(this.raw.upstream_io_total, () => {
      const t = this.upstreamTraffic;
      return { requests: t?.sentRequests ?? 0, writes: t?.writes() ?? 0, reads: t?.reads ?? 0 };
    });
    this.raw.config_last_reload_successful.set(1);
    this.raw.config_last_reload_success_timestamp_seconds.set(Date.now() / 1000);

    this.clientConnections = this.raw.client_connections;
    this.clientConnectionsAccepted = this.raw.client_connections_accepted_total;
    this.protocolErrors = this.raw.protocol_errors_total;
    this.topologyEpoch = this.raw.topology_epoch;
    this.slotsCovered = this.raw.slots_covered;

    const r = this.raw;
    this.rejected = preset(CONNECTION_REJECT_REASONS, (v) => r.client_connections_rejected_total.labels(v));
    this.redirects = preset(REDIRECT_TYPES, (v) => r.redirects_total.labels(v));
    this.retries = preset(RETRY_REASONS, (v) => r.retries_total.labels(v));
    this.leaseRefusals = preset(LEASE_REFUSAL_REASONS, (v) => r.lease_refusals_total.labels(v));
    this.refreshes = preset(TOPOLOGY_REFRESH_TRIGGERS, (t) =>
      preset(TOPOLOGY_REFRESH_OUTCOMES, (o) => r.topology_refreshes_total.labels(t, o)),
    );
    this.crossSlotTransactions = preset(CROSS_SLOT_TRANSACTION_ACTIONS, (v) => r.cross_slot_transactions_total.labels(v));
    this.crossSlotTransactionGroups = preset(TRANSACTION_GROUP_OUTCOMES, (v) => r.cross_slot_transaction_groups_total.labels(v));
    this.crossSlotCommands = preset(CROSS_SLOT_COMMAND_KINDS, (v) => r.cross_slot_commands_total.labels(v));
    this.crossSlotPutBacks = preset(PUT_BACK_OUTCOMES, (v) => r.cross_slot_put_backs_total.labels(v));
    this.parkedClients = r.parked_clients;
    this.parkWatchConnections = r.park_watch_connections;
    this.parkPutBacks = preset(PUT_BACK_OUTCOMES, (v) => r.park_put_backs_total.labels(v));
    // Make the fixed-vocabulary series visible at 0 so rate() works from the first scrape.
    for (const group of [this.rejected, this.redirects, this.retries, this.leaseRefusals, this.crossSlotTransactions, this.crossSlotTransactionGroups, this.crossSlotCommands, this.crossSlotPutBacks, this.parkPutBacks]) {
      for (const child of Object.values<Counter.Internal>(group)) child.inc(0);
    }
    for (const byOutcome of Object.values(this.refreshes)) {
      for (const child of Object.values<Counter.Internal>(byOutcome)) child.inc(0);
    }
    // A lone instance is a fleet of one: itself, alive (src/fleet replaces these when it runs).
    for (const state of FLEET_MEMBER_STATES) r.fleet_members.labels(state).set(state === 'alive' ? 1 : 0);
    for (const outcome of SPLIT_FILL_OUTCOMES) r.split_fills_total.labels(outcome).inc(0);
    r.fleet_state_version.set(0);
    r.fleet_state_confirmed_age_seconds.set(0);

    this.knownCommands = opts.knownCommands ? new Set(opts.knownCommands) : null;
    this.maxCommandLabels = opts.maxCommandLabels ?? DEFAULT_MAX_COMMAND_LABELS;
  }

  /** Content-Type of `render()`'s output: "text/plain; version=0.0.4; charset=utf-8". */
  get contentType(): string {
    return this.registry.contentType;
  }

  /** Prometheus text exposition of every metric. */
  render(): Promise<string> {
    return this.registry.metrics();
  }

  // ---- command label ------------------------------------------------------------------------

  /**
   * Replace the set of command names allowed as `command` label values (e.g. after reading
   * COMMAND INFO from an upstream). Children already created stay.
   */
  setKnownCommands(names: Iterable<string>): void {
    this.knownCommands = new Set(names);
  }

  /** The bounded `command` label value for a lower-case command name ("unknown" if not known). */
  commandLabel(name: string): string {
    const known = this.knownCommands;
    if (known !== null) return known.has(name) ? name : UNKNOWN_COMMAND_LABEL;
    if (this.seenCommands.has(name)) return name;
    if (name === UNKNOWN_COMMAND_LABEL || !COMMAND_NAME_RE.test(name)) return UNKNOWN_COMMAND_LABEL;
    if (this.seenCommands.size >= this.maxCommandLabels) return UNKNOWN_COMMAND_LABEL;
    this.seenCommands.add(name);
    return name;
  }

  /**
   * `respool_commands_total{command}` count for a lower-case command name. A plain number (read
   * at scrape time): prom-client's `inc()` hashes the label set on every call, once per request.
   */
  commandCounter(name: string): CommandCount {
    const hit = this.commandCounts.get(name);
    if (hit !== undefined) return hit;
    const label = this.commandLabel(name);
    let child = this.commandCounts.get(label);
    if (child === undefined) {
      child = new CommandCount();
      this.commandCounts.set(label, child);
    }
    return child;
  }

  /** `respool_command_errors_total{command,kind}` child. */
  commandErrorCounter(name: string, kind: CommandErrorKind): Counter.Internal {
    let byKind = this.commandErrors.get(name);
    if (byKind === undefined) {
      const label = this.commandLabel(name);
      byKind = this.commandErrors.get(label);
      if (byKind === undefined) {
        byKind = preset(COMMAND_ERROR_KINDS, () => undefined as Counter.Internal | undefined);
        this.commandErrors.set(label, byKind);
      }
    }
    let child = byKind[kind];
    if (child === undefined) {
      // Look the label up again: `name` may differ from the label it maps to.
      child = this.raw.command_errors_total.labels(this.commandLabel(name), kind);
      byKind[kind] = child;
    }
    return child;
  }

  // ---- clients ------------------------------------------------------------------------------

  /** `respool_client_connections_rejected_total{reason}` child. */
  connectionRejectedCounter(reason: ConnectionRejectReason): Counter.Internal {
    return this.rejected[reason] ?? this.raw.client_connections_rejected_total.labels(reason);
  }

  // ---- upstream -----------------------------------------------------------------------------

  /** `respool_upstream_latency_seconds{node}` child, also the node's last minute; observe seconds. */
  latencyHistogram(node: string): HistogramSeries {
    let child = this.latency.get(node);
    if (child === undefined) {
      child = new WindowedSeries(this.raw.upstream_latency_seconds.labels(node), this.windows.node(node), null);
      this.latency.set(node, child);
    }
    return child;
  }

  /** `respool_upstream_inflight_requests{node}` child. */
  inflightGauge(node: string): Gauge.Internal<'node'> {
    let child = this.inflight.get(node);
    if (child === undefined) {
      child = this.raw.upstream_inflight_requests.labels(node);
      this.inflight.set(node, child);
    }
    return child;
  }

  /** `respool_upstream_links{node,protocol,role}` child (inc on open, dec on close). */
  upstreamLinksGauge(node: string, protocol: LinkProtocol, role: LinkRole): Gauge.Internal<'node' | 'protocol' | 'role'> {
    const key = `${node}\0${protocol}\0${role}`;
    let series = this.links.get(key);
    if (series === undefined) {
      const values = [node, protocol, role];
      series = { node, values, child: this.raw.upstream_links.labels(...values) };
      this.links.set(key, series);
    }
    return series.child;
  }

  /** `respool_upstream_link_connects_total{node,outcome}` child. */
  linkConnectCounter(node: string, outcome: LinkConnectOutcome): Counter.Internal {
    const key = `${node}\0${outcome}`;
    let series = this.connects.get(key);
    if (series === undefined) {
      const values = [node, outcome];
      series = { node, values, child: this.raw.upstream_link_connects_total.labels(...values) };
      this.connects.set(key, series);
    }
    return series.child;
  }

  /** The near cache's counters (NearCache.stats()), copied into respool_near_cache_* when the registry is read. */
  nearCacheAtScrape(stats: () => Readonly<Record<string, number>>): void {
    const raw = this.raw;
    collect(raw.near_cache_entries, () => raw.near_cache_entries.set(stats()['entries'] ?? 0));
    collect(raw.near_cache_bytes, () => raw.near_cache_bytes.set(stats()['bytes'] ?? 0));
    collect(raw.near_cache_reads_total, () => {
      const s = stats();
      raw.near_cache_reads_total.reset();
      for (const result of ['hits', 'misses', 'coalesced', 'passed_on']) raw.near_cache_reads_total.labels(result === 'hits' ? 'hit' : result === 'misses' ? 'miss' : result).inc(s[result] ?? 0);
    });
    collect(raw.near_cache_invalidations_total, () => {
      raw.near_cache_invalidations_total.reset();
      raw.near_cache_invalidations_total.inc(stats()['invalidations'] ?? 0);
    });
    collect(raw.near_cache_evictions_total, () => {
      raw.near_cache_evictions_total.reset();
      raw.near_cache_evictions_total.inc(stats()['evictions'] ?? 0);
    });
  }

  /** A live migration's status (Migration.status()), copied into respool_migration_* when the registry is read. */
  migrationAtScrape(status: () => Readonly<Record<string, string | number | boolean | null>>): void {
    const raw = this.raw;
    const number = (v: unknown) => (typeof v === 'number' ? v : 0);
    collect(raw.migration_state, () => {
      const now = status()['state'];
      for (const state of MIGRATION_STATES) raw.migration_state.labels(state).set(state === now ? 1 : 0);
    });
    collect(raw.migration_keys_total, () => {
      const s = status();
      raw.migration_keys_total.reset();
      for (const kind of ['copied', 'mirrored', 'recopied', 'deleted', 'verified', 'mismatched']) raw.migration_keys_total.labels(kind).inc(number(s[kind]));
    });
    collect(raw.migration_bytes_total, () => {
      raw.migration_bytes_total.reset();
      raw.migration_bytes_total.inc(number(status()['bytes']));
    });
    collect(raw.migration_unseen_writes_per_second, () => raw.migration_unseen_writes_per_second.set(number(status()['unseen_writes_per_second'])));
    collect(raw.migration_cutover_pause_seconds, () => raw.migration_cutover_pause_seconds.set(number(status()['cutover_pause_ms']) / 1000));
    collect(raw.migration_pace_keys_per_second, () => raw.migration_pace_keys_per_second.set(number(status()['pace_keys_per_second'])));
  }

  /** The tenants' figures, copied into respool_tenant_* when the registry is read (tenant-metrics.ts). */
  tenantsAtScrape(list: () => ReadonlyArray<TenantFigures>): void {
    tenantsAtScrape(this.raw, list);
  }

  /**
   * Runs `update` when the registry is read (before respool_leased_connections is collected): the
   * dedicated pools set the gauges of the nodes that changed since then, not on every lease and
   * return (three label hashes per acquire and per release were on the blocking wake path).
   */
  leasedConnectionsAtScrape(update: () => void): void {
    collect(this.raw.leased_connections, update);
  }

  /** `respool_leased_connections{node,state}` child (set by the dedicated pools for the nodes that changed, at scrape time). */
  leasedConnectionsGauge(node: string, state: LeaseState): Gauge.Internal<'node' | 'state'> {
    const key = `${node}\0${state}`;
    let series = this.leased.get(key);
    if (series === undefined) {
      const values = [node, state];
      series = { node, values, child: this.raw.leased_connections.labels(...values) };
      this.leased.set(key, series);
    }
    return series.child;
  }

  /** `respool_lease_refusals_total{reason}` child. */
  leaseRefusalCounter(reason: LeaseRefusalReason): Counter.Internal {
    return this.leaseRefusals[reason] ?? this.raw.lease_refusals_total.labels(reason);
  }

  /** Drop every series labelled with `node` (call when a node leaves the topology). */
  forgetNode(node: string): void {
    if (this.latency.delete(node)) this.raw.upstream_latency_seconds.remove(node);
    this.windows.forgetNode(node);
    if (this.inflight.delete(node)) this.raw.upstream_inflight_requests.remove(node);
    for (const s of ['closed', 'half-open', 'open']) this.raw.circuit_status.remove(node, s);
    for (const [key, s] of this.links) {
      if (s.node !== node) continue;
      this.links.delete(key);
      this.raw.upstream_links.remove(...s.values);
    }
    for (const [key, s] of this.connects) {
      if (s.node !== node) continue;
      this.connects.delete(key);
      this.raw.upstream_link_connects_total.remove(...s.values);
    }
    for (const [key, s] of this.leased) {
      if (s.node !== node) continue;
      this.leased.delete(key);
      this.raw.leased_connections.remove(...s.values);
    }
  }

  // ---- cluster ------------------------------------------------------------------------------

  /** `respool_redirects_total{type}` child. */
  redirectCounter(type: RedirectType): Counter.Internal {
    return this.redirects[type] ?? this.raw.redirects_total.labels(type);
  }

  /** `respool_retries_total{reason}` child. */
  retryCounter(reason: RetryReason): Counter.Internal {
    return this.retries[reason] ?? this.raw.retries_total.labels(reason);
  }

  /** `respool_topology_refreshes_total{trigger,outcome}` child. */
  topologyRefreshCounter(trigger: TopologyRefreshTrigger, outcome: TopologyRefreshOutcome): Counter.Internal {
    return this.refreshes[trigger]?.[outcome] ?? this.raw.topology_refreshes_total.labels(trigger, outcome);
  }
}
