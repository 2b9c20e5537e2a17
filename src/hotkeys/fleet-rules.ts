import type { Logger } from 'pino';
import type { TopologyRefresher } from '../cluster/topology-refresher.js';
import type { FleetDoc, FleetRule, FleetState } from '../fleet/fleet-state.js';
import type { CopyFills } from './copy-fill.js';
import { checkRule, MAX_AUTO_SPLIT, MAX_RULES, type SplitKey, type SplitRule, type SplitRuleInput, type SplitRuleKind } from './split-key.js';

/** How long a fleet change waits for every member beyond the lease (fleet-state.ts STALE_MARGIN_MS and a beat or two). */
const FLEET_CONFIRM_EXTRA_MS = 2_000;
/** How long RESPOOL SPLIT ADD waits for the first fill of a fleet split key. */
const FIRST_FILL_MS = 3_000;
/** A rule left half removed (its remover died) is finished by another member after this long. */
const REMOVING_STALE_MS = 10_000;

/** What the fleet's rules need of the hot-key manager: its own table of rules and split keys. */
export interface RuleTable {
  readonly fills: CopyFills;
  findRule(kind: SplitRuleKind, text: string): SplitRule | undefined;
  rules(): SplitRule[];
  splitKey(key: string): SplitKey | undefined;
  splitKeys(): SplitKey[];
  addLocalRule(kind: SplitRuleKind, text: string, copies: number | null, auto: boolean): SplitRule;
  removeLocalRule(text: string, kind?: SplitRuleKind): Promise<boolean>;
}

/**
 * A fleet's split rules (cluster.fleetState): they live in the fleet's shared state
 * (fleet/fleet-state.ts), and each instance's own table follows it (apply). Adding waits until
 * every member that is not stale applied the rule — from then on every write through the fleet
 * reaches the copies — and then for the first fill (copy-fill.ts); removing goes in two steps,
 * so no member stops writing copies another still reads. A removal whose member died between
 * the steps is finished by another (the janitor).
 */
export class FleetRules {
  /** When each rule was first seen 'removing' here (to finish an abandoned removal). */
  private readonly removingSince = new Map<string, number>();
  private janitor: NodeJS.Timeout | null = null;

  constructor(
    private readonly table: RuleTable,
    private readonly state: FleetState,
    private readonly refresher: TopologyRefresher,
    private readonly log: Logger,
  ) {
    state.onDoc((doc) => this.apply(doc));
  }

  start(): void {
    this.janitor = setInterval(() => void this.finishAbandonedRemovals(), 2_000);
    this.janitor.unref();
  }

  stop(): void {
    if (this.janitor) clearInterval(this.janitor);
  }

  /**
   * Adds a split rule to the fleet and resolves once it is in force: once it is in the fleet's
   * state, every member that is not stale has applied it (so every write through the
   * fleet reaches the copies), and — for a key — its copies were filled once (so reads use them).
   * A member that does not confirm in time gets the rule taken back and an error naming it.
   * `added`: false when the rule was there already.
   */
  async split(input: SplitRuleInput, auto = false): Promise<{ rule: SplitRule; added: boolean }> {
    const { state } = this;
    const { kind, text, copies } = checkRule(input);
    const topology = this.refresher.current;
    if (topology === null || topology.mode !== 'cluster') throw new Error('split keys need a cluster upstream (its topology is not known yet)');
    const count = copies ?? Math.max(1, topology.primaries().length);
    let added = false;
    const version = await state.update((doc) => {
      added = false;
      const existing = doc.rules.find((r) => r.kind === kind && r.text === text);
      if (existing !== undefined) {
        if (existing.phase === 'removing') throw new Error(`${kind} ${JSON.stringify(text)} is being unsplit; add it again once that is done`);
        if (copies !== null && existing.copies !== count) {
          throw new Error(`${kind} ${JSON.stringify(text)} is already split into ${existing.copies} copies; RESPOOL SPLIT DEL it first to change the count`);
        }
        return null;
      }
      if (doc.rules.length >= MAX_RULES) throw new Error(`too many split rules (limit ${MAX_RULES})`);
      if (auto && doc.rules.filter((r) => r.auto).length >= MAX_AUTO_SPLIT) return null;
      added = true;
      doc.rules.push({ kind, text, copies: count, auto, phase: 'active', by: state.memberId, at: Date.now() });
      return doc;
    });
    const rule = this.table.findRule(kind, text);
    if (!added) {
      if (rule === undefined) throw new Error('the fleet already holds as many automatic splits as it may');
      return { rule, added: false };
    }
    const behind = await state.awaitApplied(version, state.leaseMs + FLEET_CONFIRM_EXTRA_MS);
    if (behind.length > 0) {
      await this.unsplit(text, kind).catch(() => false);
      throw new Error(`fleet member${behind.length > 1 ? 's' : ''} ${behind.join(', ')} did not confirm the split within ${state.leaseMs + FLEET_CONFIRM_EXTRA_MS} ms; it was taken back`);
    }
    const split = kind === 'key' ? this.table.splitKey(text) : undefined;
    if (split !== undefined) {
      const deadline = Date.now() + FIRST_FILL_MS;
      while (Date.now() < deadline && Date.now() >= split.readableUntil && this.table.splitKey(text) === split) {
        const outcome = await this.table.fills.fill(split);
        if (outcome !== 'ok') await sleep(outcome === 'busy' ? 20 : 100);
      }
    }
    return { rule: rule!, added: true };
  }

  /**
   * Removes a rule from the fleet in two steps — first every member stops reading its copies (while
   * still writing them), then, once every member that is not stale applied that, the rule goes
   * and every member deletes the copies it made. False when there is no such rule.
   */
  async unsplit(text: string, kind?: SplitRuleKind): Promise<boolean> {
    const { state } = this;
    const matches = (r: FleetRule) => r.text === text && (kind === undefined || r.kind === kind);
    let found = false;
    const version = await state.update((doc) => {
      const rule = doc.rules.find(matches);
      found = rule !== undefined;
      if (rule === undefined || rule.phase === 'removing') return null;
      rule.phase = 'removing';
      return doc;
    });
    if (!found) return false;
    const behind = await state.awaitApplied(version, state.leaseMs + FLEET_CONFIRM_EXTRA_MS);
    if (behind.length > 0) {
      throw new Error(`fleet member${behind.length > 1 ? 's' : ''} ${behind.join(', ')} did not confirm within ${state.leaseMs + FLEET_CONFIRM_EXTRA_MS} ms; the copies are no longer read where confirmed, and the removal is finished later`);
    }
    await state.update((doc) => {
      const next = doc.rules.filter((r) => !(matches(r) && r.phase === 'removing'));
      return next.length === doc.rules.length ? null : { ...doc, rules: next };
    });
    return true;
  }

  /** The fleet's state changed: this instance's rules follow it. */
  private apply(doc: FleetDoc): void {
    const wanted = new Set(doc.rules.map((r) => `${r.kind}\u0000${r.text}`));
    for (const local of this.table.rules()) {
      if (!wanted.has(`${local.kind}\u0000${local.text}`)) void this.table.removeLocalRule(local.text, local.kind);
    }
    for (const r of doc.rules) {
      let local = this.table.findRule(r.kind, r.text);
      if (local === undefined) {
        try {
          local = this.table.addLocalRule(r.kind, r.text, r.copies, r.auto);
        } catch (err) {
          this.log.error({ [r.kind]: r.text, err: (err as Error).message }, 'fleet: a split rule of the shared state cannot be applied here');
          continue;
        }
      }
      local.reading = r.phase === 'active';
      if (!local.reading) {
        for (const split of this.table.splitKeys()) if (split.rule === local) split.readableUntil = 0;
        if (!this.removingSince.has(`${r.kind}\u0000${r.text}`)) this.removingSince.set(`${r.kind}\u0000${r.text}`, Date.now());
      } else {
        this.removingSince.delete(`${r.kind}\u0000${r.text}`);
      }
    }
  }

  /** A rule left 'removing' by a member that died before the second step: finished here. */
  private async finishAbandonedRemovals(): Promise<void> {
    const now = Date.now();
    for (const [id, since] of this.removingSince) {
      if (now - since < REMOVING_STALE_MS) continue;
      this.removingSince.set(id, now); // once per REMOVING_STALE_MS at most
      const [kind, text] = id.split('\u0000') as [SplitRuleKind, string];
      await this.unsplit(text, kind).catch((err: Error) => this.log.debug({ [kind]: text, err: err.message }, 'fleet: abandoned removal not finished yet'));
    }
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
