/** The split rules' table (src/hotkeys/split-rule-table.ts): lookup order, the per-slot count of exact rules, removal, the bound. */
import calculateSlot from 'cluster-key-slot';
import { describe, expect, it } from 'vitest';
import { SplitRuleTable } from '../../src/hotkeys/split-rule-table.js';
import { MAX_RULES } from '../../src/hotkeys/split-key.js';

describe('SplitRuleTable', () => {
  it('a key falls under its exact rule, else the first prefix, else the first pattern', () => {
    const t = new SplitRuleTable();
    const pattern = t.add('pattern', 'user:*:cart', 2, false);
    const prefix = t.add('prefix', 'user:', 3, false);
    t.add('prefix', 'user:1', 4, false);
    const exact = t.add('key', 'user:1:cart', 5, false);
    expect(t.size).toBe(4);
    expect(t.hasExactIn(calculateSlot('user:1:cart'))).toBe(true);
    expect(t.exactRule(Buffer.from('user:1:cart').toString('latin1'))).toBe(exact);
    expect(t.prefixOrPattern(Buffer.from('user:2:cart'))).toBe(prefix); // prefixes before patterns, the first added first
    expect(t.prefixOrPattern(Buffer.from('other'))).toBeUndefined();
    t.remove(prefix);
    expect(t.prefixOrPattern(Buffer.from('user:2:cart'))).toBe(pattern);
    expect(t.find('prefix', 'user:1')?.copies).toBe(4);
    expect(t.all().map((r) => r.text)).toEqual(['user:1:cart', 'user:1', 'user:*:cart']);
  });

  it('counts exact rules per slot, so a slot without one is passed by a number test', () => {
    const t = new SplitRuleTable();
    const a = t.add('key', 'a', null, false);
    const slot = calculateSlot('a');
    expect(t.hasExactIn(slot)).toBe(true);
    expect(t.hasExactIn((slot + 1) % 16384)).toBe(false);
    t.remove(a);
    expect(t.hasExactIn(slot)).toBe(false);
    expect(t.size).toBe(0);
  });

  it(`refuses a rule past ${MAX_RULES}`, () => {
    const t = new SplitRuleTable();
    for (let i = 0; i < MAX_RULES; i++) t.add('prefix', `p${i}:`, null, false);
    expect(() => t.add('key', 'one-more', null, false)).toThrow(/too many split rules/);
  });
});
