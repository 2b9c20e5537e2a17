// The `hotKeys` section of the configuration (src/hotkeys/*): its file schema, the conversion of
// the file's values and of the --hot-keys-* / --split-key flags into settings-map entries
// ("hotKeys.detection.sampleRate" → 0.01, "hotKeys.split" → [...]). file-config.ts and flag-config.ts call these.

import { DURATION_PATTERN, ValueProblem, show, toDuration, toEnum, toInteger } from './values.js';

export type ReadChoice = 'roundRobin' | 'random';
export const READ_CHOICES: readonly ReadChoice[] = ['roundRobin', 'random'];

export interface SplitRuleConfig {
  key?: string;
  prefix?: string;
  pattern?: string;
  /** Copies including the original; null = one per primary. */
  copies: number | null;
}

export interface HotKeysConfig {
  detection: {
    enabled: boolean; // default true
    sampleRate: number; // default 0.01: one keyed request in 100 is counted
    windowMs: number; // default 10000: reports are rates over one window
    topK: number; // default 10
    /** Key names as metric label values (respool_hotkeys_top_key_*{key}); default false: rank only. At most 20 ranks. */
    keyNamesInMetrics: boolean;
  };
  split: SplitRuleConfig[]; // default []
  autoSplit: { enabled: boolean; share: number; copies: number | null }; // default off, 0.5, one per primary
  readChoice: ReadChoice; // default roundRobin (measured: spreads evenly; random is within a few %)
  /**
   * Milliseconds a split key's copies are read after they were last filled from the original;
   * past it reads go to the original until a fill (writes held meanwhile) brings the copies back.
   * Bounds what a write that bypassed respool (a client on a node) leaves stale. 0 = no bound.
   * Default 10000.
   */
  maxCopyAge: number;
}

export const DEFAULT_HOT_KEYS: HotKeysConfig = {
  detection: { enabled: true, sampleRate: 0.01, windowMs: 10_000, topK: 10, keyNamesInMetrics: false },
  split: [],
  autoSplit: { enabled: false, share: 0.5, copies: null },
  readChoice: 'roundRobin',
  maxCopyAge: 10_000,
};

const WINDOW = { min: 100, max: 24 * 3_600_000 };
const TOP_K = { min: 1, max: 1000 };
const COPY_AGE = { min: 0, max: 24 * 3_600_000 };
const COPIES = { min: 1, max: 1024 };

const share = (what: string) => ({
  type: 'number', exclusiveMinimum: 0, maximum: 1, 'x-expect': `${what} must be a number above 0 and at most 1`,
});
const copies = {
  type: ['integer', 'null'], minimum: COPIES.min, maximum: COPIES.max,
  'x-expect': `must be an integer from ${COPIES.min} to ${COPIES.max}, or null (one copy per primary)`,
};

export const HOT_KEYS_SCHEMA: Record<string, unknown> = {
  type: 'object',
  additionalProperties: false,
  'x-expect': 'must be a mapping with detection, split, autoSplit, readChoice',
  properties: {
    detection: {
      type: 'object',
      additionalProperties: false,
      'x-expect': 'must be a mapping with enabled, sampleRate, windowMs, topK',
      properties: {
        enabled: { type: 'boolean', 'x-expect': 'must be true or false' },
        sampleRate: share('the share of requests sampled'),
        windowMs: {
          type: ['integer', 'string'], minimum: 0, pattern: DURATION_PATTERN.source,
          'x-expect': 'must be a duration like 10s',
        },
        topK: { type: 'integer', minimum: TOP_K.min, maximum: TOP_K.max, 'x-expect': `must be an integer from ${TOP_K.min} to ${TOP_K.max}` },
        keyNamesInMetrics: { type: 'boolean', 'x-expect': 'must be true or false' },
      },
    },
    split: {
      type: 'array',
      'x-expect': 'must be a list of { key | prefix | pattern, copies } mappings',
      items: {
        type: 'object',
        additionalProperties: false,
        'x-expect': 'must be a mapping with one of key, prefix, pattern, and optionally copies',
        properties: {
          key: { type: 'string', minLength: 1, 'x-expect': 'must be a non-empty string' },
          prefix: { type: 'string', minLength: 1, 'x-expect': 'must be a non-empty string' },
          pattern: { type: 'string', minLength: 1, 'x-expect': 'must be a non-empty string' },
          copies,
        },
      },
    },
    autoSplit: {
      type: 'object',
      additionalProperties: false,
      'x-expect': 'must be a mapping with enabled, share, copies',
      properties: {
        enabled: { type: 'boolean', 'x-expect': 'must be true or false' },
        share: share('the share of requests that makes a key hot'),
        copies,
      },
    },
    readChoice: { enum: [...READ_CHOICES], 'x-expect': `must be one of ${READ_CHOICES.join(', ')}` },
    maxCopyAge: {
      type: ['integer', 'string'], minimum: 0, pattern: DURATION_PATTERN.source,
      'x-expect': 'must be a duration like 10s (0 = no bound)',
    },
  },
};

type Convert = <T>(path: string, raw: unknown, fn: (v: unknown) => T) => T | undefined;

/** One split rule from the file or a flag; exactly one of key, prefix, pattern. */
export function toSplitRule(v: unknown): SplitRuleConfig {
  const r = v as Record<string, unknown>;
  const given = ['key', 'prefix', 'pattern'].filter((k) => r[k] !== undefined);
  if (given.length !== 1) throw new ValueProblem(`give exactly one of key, prefix, pattern (got ${given.length === 0 ? 'none' : given.join(' and ')})`);
  const kind = given[0]!;
  return { [kind]: r[kind] as string, copies: (r.copies as number | null | undefined) ?? null };
}

/** File values → settings-map entries (the schema has already checked their shapes). */
export function readHotKeysFile(raw: unknown, convert: Convert, set: (key: string, value: unknown) => void): void {
  if (raw === null || typeof raw !== 'object') return;
  const h = raw as Record<string, unknown>;
  const d = h.detection as Record<string, unknown> | undefined;
  if (d !== undefined && d !== null) {
    set('hotKeys.detection.enabled', convert('hotKeys.detection.enabled', d.enabled, (v) => v as boolean));
    set('hotKeys.detection.sampleRate', convert('hotKeys.detection.sampleRate', d.sampleRate, (v) => toShare(v)));
    set('hotKeys.detection.windowMs', convert('hotKeys.detection.windowMs', d.windowMs, (v) => toDuration(v, WINDOW)));
    set('hotKeys.detection.topK', convert('hotKeys.detection.topK', d.topK, (v) => toInteger(v, TOP_K)));
    set('hotKeys.detection.keyNamesInMetrics', convert('hotKeys.detection.keyNamesInMetrics', d.keyNamesInMetrics, (v) => v as boolean));
  }
  if (Array.isArray(h.split)) {
    const rules: SplitRuleConfig[] = [];
    h.split.forEach((entry, i) => {
      const rule = convert(`hotKeys.split[${i}]`, entry, (v) => toSplitRule(v));
      if (rule) rules.push(rule);
    });
    set('hotKeys.split', rules);
  }
  const a = h.autoSplit as Record<string, unknown> | undefined;
  if (a !== undefined && a !== null) {
    set('hotKeys.autoSplit.enabled', convert('hotKeys.autoSplit.enabled', a.enabled, (v) => v as boolean));
    set('hotKeys.autoSplit.share', convert('hotKeys.autoSplit.share', a.share, (v) => toShare(v)));
    if (a.copies === null) set('hotKeys.autoSplit.copies', null);
    else set('hotKeys.autoSplit.copies', convert('hotKeys.autoSplit.copies', a.copies, (v) => toInteger(v, COPIES)));
  }
  set('hotKeys.readChoice', convert('hotKeys.readChoice', h.readChoice, (v) => toEnum(v, READ_CHOICES)));
  set('hotKeys.maxCopyAge', convert('hotKeys.maxCopyAge', h.maxCopyAge, (v) => toDuration(v, COPY_AGE)));
}

/** The hot-key flags (see flags.ts) → settings-map entries. */
export function convertHotKeyFlags(
  values: Record<string, unknown>,
  out: Map<string, unknown>,
  problems: string[],
): void {
  const attempt = (flag: string, key: string, fn: (v: string) => unknown) => {
    const v = values[flag];
    if (typeof v !== 'string') return;
    try {
      out.set(key, fn(v));
    } catch (e) {
      if (!(e instanceof ValueProblem)) throw e;
      problems.push(`--${flag}: ${e.message}`);
    }
  };
  attempt('hot-keys-detection', 'hotKeys.detection.enabled', (v) => toEnum(v, ['on', 'off']) === 'on');
  attempt('hot-keys-sample-rate', 'hotKeys.detection.sampleRate', (v) => toShare(Number(v), v));
  attempt('hot-keys-window', 'hotKeys.detection.windowMs', (v) => toDuration(v, WINDOW));
  const splits = values['split-key'] as string[] | undefined;
  if (splits !== undefined) {
    const rules: SplitRuleConfig[] = [];
    for (const s of splits) {
      // KEY or KEY=N (copies); a key containing "=" can be given in the config file.
      const m = /^(.*)=(\d+)$/.exec(s);
      const key = m ? m[1]! : s;
      if (key === '') {
        problems.push(`--split-key: expected KEY or KEY=COPIES (got ${show(s)})`);
        continue;
      }
      try {
        rules.push({ key, copies: m ? toInteger(Number(m[2]), COPIES) : null });
      } catch (e) {
        if (!(e instanceof ValueProblem)) throw e;
        problems.push(`--split-key: copies ${e.message}`);
      }
    }
    out.set('hotKeys.split', rules);
  }
}

function toShare(v: unknown, shown: unknown = v): number {
  if (typeof v !== 'number' || !Number.isFinite(v) || v <= 0 || v > 1) {
    throw new ValueProblem(`must be a number above 0 and at most 1 (got ${show(shown)})`);
  }
  return v;
}
