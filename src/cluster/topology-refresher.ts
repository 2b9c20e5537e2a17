import type { Logger } from 'pino';
import { discoverFrom, type UpstreamMode } from './discovery.js';
import { Topology, SLOT_COUNT } from './topology.js';
import type { UpstreamPools } from '../upstream/upstream-pools.js';
import type { Metrics } from '../metrics/metrics.js';
import { Backoff } from '../upstream/backoff.js';
import { RateLimitedLog } from '../util/rate-limited-log.js';
import { diffTopology } from './topology-diff.js';

export type RefreshTrigger = 'startup' | 'moved' | 'periodic' | 'error' | 'cutover';

/**
 * How a snapshot came to be: read from the cluster ('discovered'), or patched from one MOVED
 * reply ('moved': one slot changed owner; no node removed).
 */
export type TopologyChange = 'discovered' | 'moved';

export interface RefresherOptions {
  seeds: Array<{ host: string; port: number }>;
  mode: UpstreamMode;
  pools: UpstreamPools;
  minIntervalMs: number;
  periodMs: number;
  log: Logger;
  metrics?: Metrics;
  /** Operator event lines (topology changed, refresh failed); default: rate limited on `log`. */
  events?: RateLimitedLog;
}

/**
 * Owns the current topology snapshot and the only way it changes.
 *
 * - single flight: at most one discovery runs; callers during it share its result;
 * - rate limited: requests within minIntervalMs of the last run coalesce into one run at the
 *   end of the interval (plus jitter), so a storm of MOVED replies causes one refresh;
 * - periodic: a jittered check every periodMs catches changes nobody was redirected by;
 * - startup: retried with capped, jittered backoff until a seed answers.
 */
export class TopologyRefresher {
  current: Topology | null = null;
  /** Discoveries installed so far (the `epoch` of the topology_changed line). */
  epoch = 0;
  private readonly events: RateLimitedLog;
  private inFlight: Promise<Topology | null> | null = null;
  private lastRunEndedAt = 0;
  private scheduled: NodeJS.Timeout | null = null;
  private periodic: NodeJS.Timeout | null = null;
  private stopped = false;
  /** While reseed() discovers: the configured seeds alone, not the nodes the old topology knew. */
  private seedsOnly = false;
  private readonly listeners: Array<(t: Topology, change: TopologyChange) => void> = [];

  constructor(private readonly options: RefresherOptions) {
    this.events = options.events ?? new RateLimitedLog(options.log);
  }

  onChange(listener: (t: Topology, change: TopologyChange) => void): void {
    this.listeners.push(listener);
  }

  /** Discovers until it succeeds (or stop()); resolves with the first topology. */
  async start(): Promise<Topology> {
    const backoff = new Backoff(100, 5_000);
    this.schedulePeriodic();
    for (;;) {
      const topology = await this.refreshNow('startup');
      if (topology || this.stopped) return topology ?? this.current!;
      await sleep(backoff.nextDelayMs());
    }
  }

  /** Asks for a refresh soon; cheap to call often (MOVED, link errors). */
  requestRefresh(trigger: RefreshTrigger): void {
    if (this.stopped || this.inFlight || this.scheduled) {
      this.options.metrics?.topologyRefreshCounter(trigger, 'skipped').inc();
      return;
    }
    const wait = this.lastRunEndedAt + this.options.minIntervalMs - Date.now();
    if (wait <= 0) {
      void this.refreshNow(trigger);
      return;
    }
    this.scheduled = setTimeout(() => {
      this.scheduled = null;
      void this.refreshNow(trigger);
    }, wait + Math.floor(Math.random() * Math.min(250, this.options.minIntervalMs / 4)));
    this.scheduled.unref();
  }

  /** Runs a discovery now unless one is running (then shares it). Null when every seed failed. */
  refreshNow(trigger: RefreshTrigger): Promise<Topology | null> {
    if (this.inFlight) return this.inFlight;
    this.inFlight = this.discover(trigger).finally(() => {
      this.inFlight = null;
      this.lastRunEndedAt = Date.now();
    });
    return this.inFlight;
  }

  /**
   * Points discovery at other upstreams (a migration's cutover, src/migration): discovers them now,
   * from the new seeds alone, and installs what they say (listeners drop the old nodes' pools).
   * Null when no new seed answered: the old seeds and topology stay.
   */
  async reseed(seeds: Array<{ host: string; port: number }>, mode: UpstreamMode): Promise<Topology | null> {
    await this.inFlight;
    const before = { seeds: this.options.seeds, mode: this.options.mode };
    this.options.seeds = seeds;
    this.options.mode = mode;
    this.seedsOnly = true;
    try {
      const topology = await this.refreshNow('cutover');
      if (topology === null) Object.assign(this.options, before);
      return topology;
    } finally {
      this.seedsOnly = false;
    }
  }

  stop(): void {
    this.stopped = true;
    if (this.scheduled) clearTimeout(this.scheduled);
    if (this.periodic) clearTimeout(this.periodic);
  }

  /** Replaces the snapshot (discovery, and MOVED's copy-on-write slot updates). */
  install(topology: Topology, change: TopologyChange): void {
    this.current = topology;
    for (const listener of this.listeners) listener(topology, change);
  }

  private async discover(trigger: RefreshTrigger): Promise<Topology | null> {
    const { log, metrics, mode, pools } = this.options;
    const errors: string[] = [];
    for (const seed of this.seeds()) {
      try {
        const topology = await discoverFrom(seed, mode, pools);
        if (this.stopped) return null;
        const diff = diffTopology(this.current, topology);
        this.epoch++;
        this.install(topology, 'discovered');
        if (diff.changed) {
          const { changed: _c, ...what } = diff;
          this.events.emit('info', 'topology_changed', 'cluster', { epoch: this.epoch, trigger, shards: topology.shards.length, ...what },
            `topology changed: ${diff.slotsMoved} slots moved, ${diff.nodesAdded.length} nodes added, ${diff.nodesRemoved.length} removed, ${diff.roleChanges.length} role changes`);
        }
        metrics?.topologyRefreshCounter(trigger, 'ok').inc();
        metrics?.topologyEpoch.inc();
        metrics?.slotsCovered.set(topology.coveredSlots());
        const covered = topology.coveredSlots();
        const level = covered === SLOT_COUNT ? 'debug' : 'warn';
        log[level]({ trigger, seed: `${seed.host}:${seed.port}`, mode: topology.mode, shards: topology.shards.length, covered }, 'topology refreshed');
        return topology;
      } catch (err) {
        errors.push(`${seed.host}:${seed.port}: ${(err as Error).message}`);
      }
    }
    metrics?.topologyRefreshCounter(trigger, 'failed').inc();
    this.events.emit('warn', 'topology_refresh_failed', 'cluster', { trigger, errors }, 'topology refresh failed: no seed answered');
    return null;
  }

  /** Known nodes first (primaries, then replicas), then the configured seeds; no duplicates. */
  private seeds(): Array<{ host: string; port: number }> {
    const out = new Map<string, { host: string; port: number }>();
    const known = this.current?.mode === 'cluster' && !this.seedsOnly ? this.current.allNodes() : [];
    for (const n of [...known.filter((n) => n.role === 'primary'), ...known.filter((n) => n.role === 'replica')]) {
      if (n.health !== 'fail' && n.health !== 'failed') out.set(n.address, { host: n.host, port: n.port });
    }
    for (const s of this.options.seeds) out.set(`${s.host}:${s.port}`, s);
    return [...out.values()];
  }

  private schedulePeriodic(): void {
    if (this.stopped) return;
    const { periodMs } = this.options;
    const delay = periodMs * (0.8 + Math.random() * 0.4); // ±20% so fleets do not sync up
    this.periodic = setTimeout(() => {
      this.requestRefresh('periodic');
      this.schedulePeriodic();
    }, delay);
    this.periodic.unref();
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
