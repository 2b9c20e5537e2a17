import type { Logger } from 'pino';
import type { TopologyRefresher } from '../cluster/topology-refresher.js';
import type { HotKeysConfig } from '../config/types.js';
import type { Metrics } from '../metrics/metrics.js';
import { decodeReply, RespError } from '../resp/decode.js';
import type { UpstreamPools } from '../upstream/upstream-pools.js';
import { displayKey } from './detector.js';
import { placeCopies } from './placement.js';
import { makeCopy, type SplitCopy, type SplitKey } from './split-key.js';
import type { CopyFills } from './copy-fill.js';

/** Repair rounds before giving up while writes keep racing it. */
const REPAIR_ATTEMPTS = 5;
/** Debounce of topology changes (MOVED installs many snapshots in a burst). */
export const REPLACE_DELAY_MS = 50;

/** What placement needs of the hot keys (HotKeys implements it). */
export interface PlacementHost {
  readonly inFleet: boolean;
  readonly fills: CopyFills;
  readonly stats: { repairs: number; repairFailures: number };
  /** The split keys now. */
  splitKeys(): SplitKey[];
  /** The split key of this name, if any. */
  splitKey(key: Buffer): SplitKey | undefined;
  /** Exact rules get their split key once a topology is known. */
  materializeExact(): void;
}

export interface PlacementDeps {
  config: HotKeysConfig;
  refresher: TopologyRefresher;
  pools: UpstreamPools;
  log: Logger;
  metrics?: Metrics;
}

/**
 * Where a split key's copies live and how they are made equal to the original (placement.ts
 * chooses the names; this applies them): placed on the current topology, placed again when it
 * changes (a fleet does not move copies: a copy whose slot moved is unreadable until a fill),
 * new copies repaired (DUMP / RESTORE) before reads use them, retired copies unlinked.
 */
export class CopyPlacement {
  private replaceTimer: NodeJS.Timeout | null = null;
  private stopped = false;

  constructor(
    private readonly host: PlacementHost,
    private readonly deps: PlacementDeps,
  ) {}

  stop(): void {
    this.stopped = true;
    if (this.replaceTimer) clearTimeout(this.replaceTimer);
  }

  /** A placement is due (the topology changed within REPLACE_DELAY_MS). */
  get busy(): boolean {
    return this.replaceTimer !== null;
  }

  /** The topology changed: copies are placed again (debounced: MOVED installs many snapshots in a burst). */
  scheduleReplace(): void {
    if (this.stopped || this.replaceTimer !== null) return;
    this.replaceTimer = setTimeout(() => {
      this.replaceTimer = null;
      this.host.materializeExact();
      if (this.host.inFleet) this.checkCopyNodes();
      else for (const split of this.host.splitKeys()) void this.place(split);
    }, REPLACE_DELAY_MS);
    this.replaceTimer.unref();
  }

  /**
   * A fleet does not move copies (every member must name them alike), but a copy whose slot now
   * has another primary (a failover, a migration) may have lost writes: it is not read until a
   * fill has made it equal to the original again.
   */
  private checkCopyNodes(): void {
    const topology = this.deps.refresher.current;
    if (topology === null) return;
    for (const split of this.host.splitKeys()) {
      let moved = false;
      for (const c of split.active) {
        const owner = topology.primaryForSlot(c.slot)?.address ?? '';
        if (owner !== c.node) {
          if (c.node !== '') moved = true;
          c.node = owner;
        }
      }
      if (moved) {
        split.readableUntil = 0;
        this.host.fills.ask(split);
      }
    }
  }

  /** Places (or re-places) a split key's copies on the current topology and populates new ones. */
  async place(split: SplitKey): Promise<void> {
    const topology = this.deps.refresher.current;
    if (topology === null || topology.mode !== 'cluster' || this.stopped) return;
    const placedAt = Date.now();
    const primaries = topology.primaries().map((n) => n.address).sort();
    const ownerOf = (slot: number) => topology.primaryForSlot(slot)?.address;
    const previous = [...split.active, ...split.pending].filter((c) => c !== split.original).map((c) => c.name);
    const placement = placeCopies(split.key, split.wanted(primaries.length), primaries, ownerOf, previous);
    const signature = placement.map((p) => `${p.name.toString('latin1')}@${p.node}`).join(',');
    if (signature === split.signature) return;
    split.signature = signature;
    const generation = ++split.generation;

    const known = new Map<string, SplitCopy>();
    for (const c of [...split.active, ...split.pending]) known.set(c.id, c);
    const next: SplitCopy[] = [];
    const toRepair: SplitCopy[] = [];
    for (const p of placement) {
      const id = p.name.toString('latin1');
      const old = known.get(id);
      if (old === split.original) {
        split.original.node = p.node;
        next.push(split.original);
        continue;
      }
      // A kept copy whose node changed (failover, migration) may have lost recent writes: repair it.
      const copy = old !== undefined && old.node === p.node && split.active.includes(old) ? old : makeCopy(p.name, p.node);
      if (copy !== old) toRepair.push(copy);
      next.push(copy);
    }
    const nextIds = new Set(next.map((c) => c.id));
    // Writes reach old and new copies while the new ones are filled; reads stay on the old ones.
    split.pending = toRepair;
    await Promise.all(toRepair.map((c) => this.repairCopy(split, c)));
    if (generation !== split.generation || this.host.splitKey(split.key) !== split) return;
    const retired = [...split.active].filter((c) => !nextIds.has(c.id) && c !== split.original);
    split.active = next;
    // Read for maxCopyAge from this placement (the new copies were filled after it began); a
    // copy kept from before keeps the bound it had.
    const readable = this.deps.config.maxCopyAge > 0 ? placedAt + this.deps.config.maxCopyAge : Infinity;
    split.readableUntil = split.readableUntil === 0 ? readable : Math.min(split.readableUntil, readable);
    split.pending = [];
    split.cursor = 0;
    for (const c of retired) {
      if (!nextIds.has(c.id)) await this.call(c.slot, ['UNLINK', c.name]).catch(() => {});
    }
    this.deps.log.debug({ key: displayKey(split.id), copies: next.map((c) => `${displayKey(c.id)}@${c.node}`) }, 'split key placed');
  }

  /**
   * Makes `copy` equal to the original: DUMP + PTTL of the original, RESTORE … REPLACE on the copy
   * (or DEL when the original does not exist). Valid only if no write started meanwhile; else
   * it runs again (bounded). One repair per copy at a time.
   */
  async repairCopy(split: SplitKey, copy: SplitCopy): Promise<boolean> {
    if (copy === split.original || split.repairing.has(copy.id)) return false;
    split.repairing.add(copy.id);
    try {
      for (let attempt = 0; attempt < REPAIR_ATTEMPTS; attempt++) {
        for (let wait = 0; split.inflightWrites > 0 && wait < 200; wait++) await sleep(2);
        const seq = split.writeSeq;
        try {
          const [dump, pttl] = await Promise.all([
            this.call(split.original.slot, ['DUMP', split.key]),
            this.call(split.original.slot, ['PTTL', split.key]),
          ]);
          if (dump === null || pttl === -2) {
            await this.call(copy.slot, ['DEL', copy.name]);
          } else {
            const ttl = typeof pttl === 'number' && pttl > 0 ? pttl : 0;
            await this.call(copy.slot, ['RESTORE', copy.name, ttl, dump as Buffer, 'REPLACE']);
          }
        } catch (err) {
          this.deps.log.debug({ err: (err as Error).message, copy: displayKey(copy.id) }, 'split copy repair failed');
          await sleep(50 * (attempt + 1));
          continue;
        }
        if (seq === split.writeSeq && split.inflightWrites === 0) {
          this.host.stats.repairs++;
          this.deps.metrics?.raw.split_repairs_total.labels('ok').inc();
          return true;
        }
      }
      this.host.stats.repairFailures++;
      this.deps.metrics?.raw.split_repairs_total.labels('failed').inc();
      return false;
    } finally {
      split.repairing.delete(copy.id);
    }
  }

  /** Control-plane command on the primary serving `slot`; the decoded reply (errors throw). */
  async call(slot: number, args: Array<string | Buffer | number>): Promise<unknown> {
    const topology = this.deps.refresher.current;
    const node = topology?.primaryForSlot(slot);
    if (node === undefined) throw new Error(`slot ${slot} not served`);
    const frame = await this.deps.pools.forNode(node, 2, 'primary').call(args);
    const reply = decodeReply(frame);
    if (reply instanceof RespError) {
      if (/^(MOVED|ASK) /.test(reply.message)) this.deps.refresher.requestRefresh('moved');
      throw new Error(reply.message);
    }
    return reply;
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
