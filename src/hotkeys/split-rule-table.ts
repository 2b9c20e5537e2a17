import calculateSlot from 'cluster-key-slot';
import { SLOT_COUNT } from '../cluster/topology.js';
import { globMatch } from '../util/glob.js';
import { MAX_RULES, type SplitRule, type SplitRuleKind } from './split-key.js';

/**
 * This instance's split rules (hot-keys.ts applies them; in a fleet fleet-rules.ts keeps them in
 * step with the fleet's state): exact keys, prefixes and glob patterns.
 *
 *   lookup   a key's rule: its exact rule, else the first prefix that starts it, else the first
 *            pattern that matches it (rules of a kind in the order they were added).
 *   hot path exact rules are counted per slot, so a request's key is turned into a string only
 *            when its slot has one; `size` is 0 when there is nothing to look up.
 *   bound    MAX_RULES rules in all.
 */
export class SplitRuleTable {
  private readonly exact = new Map<string, SplitRule>();
  private readonly prefixes: SplitRule[] = [];
  private readonly patterns: SplitRule[] = [];
  private readonly exactSlots = new Uint16Array(SLOT_COUNT);
  private count = 0;

  get size(): number {
    return this.count;
  }

  /** Whether an exact rule's key hashes to `slot`. */
  hasExactIn(slot: number): boolean {
    return this.exactSlots[slot] !== 0;
  }

  /** The exact rule for a key given as latin1 text (binary-safe). */
  exactRule(id: string): SplitRule | undefined {
    return this.exact.get(id);
  }

  /** The first prefix rule that starts `key`, else the first pattern that matches it. */
  prefixOrPattern(key: Buffer): SplitRule | undefined {
    for (const p of this.prefixes) {
      if (key.length >= p.bytes.length && key.compare(p.bytes, 0, p.bytes.length, 0, p.bytes.length) === 0) return p;
    }
    for (const p of this.patterns) if (globMatch(p.bytes, key)) return p;
    return undefined;
  }

  /** A new rule (none of its kind and text may exist: find() first). Throws past MAX_RULES. */
  add(kind: SplitRuleKind, text: string, copies: number | null, auto: boolean): SplitRule {
    if (this.count >= MAX_RULES) throw new Error(`too many split rules (limit ${MAX_RULES})`);
    const bytes = Buffer.from(text, 'utf8');
    const rule: SplitRule = { kind, text, bytes, copies, auto, reading: true };
    if (kind === 'key') {
      this.exact.set(bytes.toString('latin1'), rule);
      this.exactSlots[calculateSlot(bytes)]!++;
    } else {
      (kind === 'prefix' ? this.prefixes : this.patterns).push(rule);
    }
    this.count++;
    return rule;
  }

  remove(rule: SplitRule): void {
    if (rule.kind === 'key') {
      this.exact.delete(rule.bytes.toString('latin1'));
      this.exactSlots[calculateSlot(rule.bytes)]!--;
    } else {
      const list = rule.kind === 'prefix' ? this.prefixes : this.patterns;
      list.splice(list.indexOf(rule), 1);
    }
    this.count--;
  }

  find(kind: SplitRuleKind, text: string): SplitRule | undefined {
    if (kind === 'key') return this.exact.get(Buffer.from(text, 'utf8').toString('latin1'));
    return (kind === 'prefix' ? this.prefixes : this.patterns).find((r) => r.text === text);
  }

  /** Every rule: exact keys, then prefixes, then patterns. */
  all(): SplitRule[] {
    return [...this.exact.values(), ...this.prefixes, ...this.patterns];
  }

  exactRules(): IterableIterator<SplitRule> {
    return this.exact.values();
  }
}
