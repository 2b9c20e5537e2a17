/**
 * Where a read-only command goes: the one file that decides between a shard's primary and its
 * replicas (the router asks; it only sends where this file says).
 *
 * Strategies (as valkey-glide defines them), each an ordered list of tiers; within a tier the
 * nodes take turns (round-robin), and the first usable node of the first tier that has one wins:
 *
 *   primary                        [primary]
 *   preferReplica                  [replicas] → [primary]
 *   azAffinity                     [replicas in respool's zone] → [other replicas] → [primary]
 *   azAffinityReplicasAndPrimary   [replicas in respool's zone] → [primary, if in respool's zone]
 *                                  → [other replicas] → [primary]
 *
 * A replica is left out of the plan when the topology reports it failed or loading, or when it
 * trails its primary by more than maxReplicaLagBytes (offsets from CLUSTER SHARDS / INFO
 * replication, as fresh as the last topology refresh). At request time a replica is skipped when
 * this request already failed on it (MOVED, LOADING, link failure: the router passes `avoid`) or
 * when it failed for any request within the last REPLICA_HOLD_MS. The primary is never skipped:
 * it is the last tier of every strategy, so a choice always exists.
 *
 * An AZ strategy while respool's own zone is unknown behaves as preferReplica (warned once).
 *
 * Plans are computed once per (shard snapshot, own zone) and cached; choosing does no allocation.
 */
import type { Logger } from 'pino';
import type { Counter } from 'prom-client';
import type { ClusterNode, Shard } from '../cluster/topology.js';
import type { Metrics } from '../metrics/metrics.js';
import type { ReadsConfig, ReadStrategyName } from '../config/types.js';
import type { ReadOutcome } from '../metrics/metric-definitions.js';

/**
 * How long a replica that failed a read (link failure, LOADING) is skipped by every request;
 * doubled for each further failure after a hold (up to REPLICA_HOLD_MAX_MS), reset once it
 * serves a read again. The topology marks a dead node failed after cluster-node-timeout.
 */
export const REPLICA_HOLD_MS = 1_000;
export const REPLICA_HOLD_MAX_MS = 16_000;

const AZ_STRATEGIES: ReadonlySet<ReadStrategyName> = new Set(['azAffinity', 'azAffinityReplicasAndPrimary']);

/** A configured strategy (global or for a key prefix). Requests carry a reference to it. */
export class ReadStrategy {
  /** What runs: the configured strategy, or preferReplica for an AZ strategy without own zone. */
  effective: ReadStrategyName;
  constructor(
    readonly name: ReadStrategyName,
    /** Index into a plan's per-strategy tiers. */
    readonly index: number,
  ) {
    this.effective = name;
  }
}

/** One possible destination of a read, precomputed per plan (no allocation per request). */
export interface ReadChoice {
  readonly node: ClusterNode;
  readonly role: 'primary' | 'replica';
  readonly outcome: ReadOutcome;
  /** respool_reads_total{strategy,outcome,node,zone}, counted when the reply arrives. */
  readonly counter: Counter.Internal | null;
}

interface ShardPlan {
  generation: number;
  /** tiers[strategy index][tier] = nodes of that tier. */
  tiers: ReadChoice[][][];
  /** Round-robin position per strategy and tier. */
  turns: number[][];
}

export class ReadRouting {
  /** False when every strategy (global and per prefix) is primary: the router skips all of this. */
  active = false;
  strategies: readonly ReadStrategy[] = [];
  global!: ReadStrategy;
  private prefixes: ReadonlyArray<{ prefix: Buffer; strategy: ReadStrategy }> = [];
  private ownZoneValue: string | null = null;
  private generation = 0;
  private plans = new WeakMap<Shard, ShardPlan>();
  /** address → time (Date.now()) until which the replica is skipped. */
  private readonly down = new Map<string, number>();
  /** address → length of its last hold (ms), until it serves a read again. */
  private readonly holds = new Map<string, number>();

  constructor(
    private readonly config: ReadsConfig,
    private readonly log: Logger,
    private readonly metrics?: Metrics,
  ) {
    this.configure();
  }

  /**
   * Reads `config` (the running reads settings, changed in place by a reload) again: strategy
   * and per-prefix strategies; shard plans are rebuilt on next use.
   */
  reconfigure(): void {
    this.configure();
    this.generation++;
    this.plans = new WeakMap();
  }

  private configure(): void {
    const config = this.config;
    const byName = new Map<ReadStrategyName, ReadStrategy>();
    const strategyOf = (name: ReadStrategyName): ReadStrategy => {
      let s = byName.get(name);
      if (s === undefined) {
        s = new ReadStrategy(name, byName.size);
        byName.set(name, s);
      }
      return s;
    };
    this.global = strategyOf(config.strategy);
    // Longest prefix first, so the most specific one wins.
    this.prefixes = [...config.prefixes]
      .sort((a, b) => Buffer.byteLength(b.prefix) - Buffer.byteLength(a.prefix))
      .map((p) => ({ prefix: Buffer.from(p.prefix), strategy: strategyOf(p.strategy) }));
    this.strategies = [...byName.values()];
    this.active = this.strategies.some((s) => s.name !== 'primary');
    this.applyZone();
  }

  get ownZone(): string | null {
    return this.ownZoneValue;
  }

  /** Sets respool's own zone (from zone-discovery); plans are rebuilt on next use. */
  setOwnZone(zone: string | null, source: string): void {
    this.ownZoneValue = zone;
    this.generation++;
    this.plans = new WeakMap();
    this.applyZone();
    if (this.metrics) {
      this.metrics.raw.zone_info.reset();
      this.metrics.raw.zone_info.labels(zone ?? 'unknown', source).set(1);
    }
    const az = this.strategies.filter((s) => AZ_STRATEGIES.has(s.name)).map((s) => s.name);
    if (zone === null && az.length > 0) {
      this.log.warn(
        { strategies: az },
        'read strategy needs respool\'s own availability zone, which is unknown (set reads.zone, --zone, RESPOOL_ZONE or reads.zoneFrom): using preferReplica instead',
      );
    }
  }

  /** The strategy for a read whose first key is `key` (undefined for keyless commands). */
  strategyFor(key: Buffer | undefined): ReadStrategy {
    const prefixes = this.prefixes;
    if (key !== undefined && prefixes.length > 0) {
      // A byte loop: prefixes are short, and Buffer#compare's native call costs more than it saves.
      outer: for (let i = 0; i < prefixes.length; i++) {
        const p = prefixes[i]!.prefix;
        const n = p.length;
        if (key.length < n) continue;
        for (let j = 0; j < n; j++) if (key[j] !== p[j]) continue outer;
        return prefixes[i]!.strategy;
      }
    }
    return this.global;
  }

  /**
   * The node for one read of `shard`, skipping replicas in `avoid` (addresses this request
   * already failed on) and replicas on hold. Always returns a choice (the primary at worst).
   */
  choose(shard: Shard, given: ReadStrategy, avoid: readonly string[] | null): ReadChoice {
    // A request picked its strategy before a reload replaced them: it gets the new global one.
    const strategy = this.strategies[given.index] === given ? given : this.global;
    const plan = this.planFor(shard);
    const tiers = plan.tiers[strategy.index]!;
    const turns = plan.turns[strategy.index]!;
    const now = this.down.size === 0 ? 0 : Date.now();
    for (let t = 0; t < tiers.length; t++) {
      const tier = tiers[t]!;
      const n = tier.length;
      const start = n === 1 ? 0 : turns[t]!++ % n;
      for (let j = 0; j < n; j++) {
        const choice = tier[(start + j) % n]!;
        if (choice.role === 'primary' || this.usable(choice.node.address, avoid, now)) return choice;
      }
    }
    // Unreachable: the last tier of every strategy is the primary.
    return tiers[tiers.length - 1]![0]!;
  }

  /** The tiers `strategy` tries for `shard`, in order (for tests, /topology and docs). */
  order(shard: Shard, strategy: ReadStrategy): ReadonlyArray<ReadonlyArray<ReadChoice>> {
    return this.planFor(shard).tiers[strategy.index]!;
  }

  /** A replica failed a read (link failure, LOADING): every request skips it for a while. */
  markFailed(address: string): void {
    const now = Date.now();
    const until = this.down.get(address);
    if (until !== undefined && until > now) return; // requests sent before the hold began
    const last = this.holds.get(address);
    const hold = last === undefined ? REPLICA_HOLD_MS : Math.min(2 * last, REPLICA_HOLD_MAX_MS);
    this.holds.set(address, hold);
    this.down.set(address, now + hold);
  }

  /** A replica answered a read: its next failure starts again from the shortest hold. */
  markServed(address: string): void {
    if (this.holds.size !== 0) this.holds.delete(address);
  }

  private usable(address: string, avoid: readonly string[] | null, now: number): boolean {
    if (avoid !== null && avoid.includes(address)) return false;
    if (now !== 0) {
      const until = this.down.get(address);
      if (until !== undefined) {
        if (until > now) return false;
        this.down.delete(address);
      }
    }
    return true;
  }

  private applyZone(): void {
    for (const s of this.strategies) {
      s.effective = AZ_STRATEGIES.has(s.name) && this.ownZoneValue === null ? 'preferReplica' : s.name;
    }
  }

  private planFor(shard: Shard): ShardPlan {
    let plan = this.plans.get(shard);
    if (plan === undefined || plan.generation !== this.generation) {
      const tiers = this.strategies.map((s) => this.buildTiers(shard, s));
      plan = { generation: this.generation, tiers, turns: tiers.map((t) => t.map(() => 0)) };
      this.plans.set(shard, plan);
    }
    return plan;
  }

  private buildTiers(shard: Shard, strategy: ReadStrategy): ReadChoice[][] {
    const zone = this.ownZoneValue;
    const primary = shard.primary;
    const replicas = shard.replicas.filter((r) => this.eligible(r, primary));
    const inZone = (n: ClusterNode) => zone !== null && n.zone === zone;
    const replica = (n: ClusterNode) => this.choice(strategy, n, 'replica', inZone(n) ? 'same_zone_replica' : 'other_zone_replica');
    const fallback = () => this.choice(strategy, primary, 'primary', 'primary_fallback');
    const near = replicas.filter(inZone).map(replica);
    const far = replicas.filter((r) => !inZone(r)).map(replica);
    let tiers: ReadChoice[][];
    switch (strategy.effective) {
      case 'primary':
        tiers = [[this.choice(strategy, primary, 'primary', 'primary')]];
        break;
      case 'preferReplica':
        tiers = [replicas.map(replica), [fallback()]];
        break;
      case 'azAffinity':
        tiers = [near, far, [fallback()]];
        break;
      case 'azAffinityReplicasAndPrimary':
        tiers = inZone(primary)
          ? [near, [this.choice(strategy, primary, 'primary', 'same_zone_primary')], far]
          : [near, far, [fallback()]];
        break;
    }
    return tiers.filter((t) => t.length > 0);
  }

  /** Online, and (with maxReplicaLagBytes) not trailing its primary by more than that. */
  private eligible(replica: ClusterNode, primary: ClusterNode): boolean {
    if (replica.health !== 'online') return false;
    const maxLag = this.config.maxReplicaLagBytes;
    if (maxLag > 0 && primary.replicationOffset > 0) {
      if (primary.replicationOffset - replica.replicationOffset > maxLag) return false;
    }
    return true;
  }

  private choice(strategy: ReadStrategy, node: ClusterNode, role: 'primary' | 'replica', outcome: ReadOutcome): ReadChoice {
    const counter = this.metrics ? this.metrics.raw.reads_total.labels(strategy.name, outcome, node.address, node.zone ?? 'unknown') : null;
    return { node, role, outcome, counter };
  }
}
