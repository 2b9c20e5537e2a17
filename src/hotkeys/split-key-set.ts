import type { Logger } from 'pino';
import calculateSlot from 'cluster-key-slot';
import type { TopologyRefresher } from '../cluster/topology-refresher.js';
import type { Metrics } from '../metrics/metrics.js';
import { bandCopies } from './placement.js';
import { COPY_MARKER, makeCopy, SplitKey, type SplitRule } from './split-key.js';

/** Concrete split keys kept at most (prefix/pattern rules materialize keys as they are seen). */
const MAX_SPLIT_KEYS = 10_000;

/** What the set asks of hot-keys.ts: a new split key's copies placed. */
export interface SplitKeySetHost {
  place(split: SplitKey): Promise<void>;
}

/**
 * The concrete split keys the rules made (split-rule-table.ts holds the rules), by key (latin1),
 * at most MAX_SPLIT_KEYS (a warning once when full: further matching keys are not split). A key
 * is made when a rule first matches it: alone, its copies are placed (copy-placement.ts); in a
 * fleet, named as every member names them and read once a fill made them equal the original.
 */
export class SplitKeySet {
  private readonly byId = new Map<string, SplitKey>();
  private warnedFull = false;

  constructor(
    private readonly host: SplitKeySetHost,
    private readonly deps: { refresher: TopologyRefresher; log: Logger; metrics?: Metrics },
    private readonly inFleet: boolean,
  ) {}

  get size(): number {
    return this.byId.size;
  }

  get(id: string): SplitKey | undefined {
    return this.byId.get(id);
  }

  has(id: string): boolean {
    return this.byId.has(id);
  }

  values(): IterableIterator<SplitKey> {
    return this.byId.values();
  }

  /** The split key for `key` under `rule` (`id`: the key in latin1), made now; null for a copy's name or when the set is full. */
  make(rule: SplitRule, key: Buffer, id: string): SplitKey | null {
    if (key.includes(COPY_MARKER)) return null;
    if (this.byId.size >= MAX_SPLIT_KEYS) {
      if (!this.warnedFull) this.deps.log.warn({ limit: MAX_SPLIT_KEYS }, 'too many split keys; further matching keys are not split');
      this.warnedFull = true;
      return null;
    }
    const split = new SplitKey(Buffer.from(key), rule);
    this.byId.set(id, split);
    this.deps.metrics?.raw.split_keys.set(this.byId.size);
    if (!this.inFleet) {
      void this.host.place(split);
      return split;
    }
    // A fleet: the names every member computes alike; read once a fill made them equal the original.
    const ownerOf = (slot: number) => this.deps.refresher.current?.primaryForSlot(slot)?.address ?? '';
    split.active = bandCopies(split.key, rule.copies ?? 1).map((name, i) => (i === 0 ? split.original : makeCopy(name, ownerOf(calculateSlot(name)))));
    split.original.node = ownerOf(split.original.slot);
    return split;
  }

  /** The split keys `rule` made, taken out of the set. */
  removeRule(rule: SplitRule): SplitKey[] {
    const removed: SplitKey[] = [];
    for (const [id, split] of this.byId) {
      if (split.rule !== rule) continue;
      this.byId.delete(id);
      removed.push(split);
    }
    this.deps.metrics?.raw.split_keys.set(this.byId.size);
    return removed;
  }
}
