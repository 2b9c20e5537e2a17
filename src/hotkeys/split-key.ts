import calculateSlot from 'cluster-key-slot';
import { encodeCommand } from '../resp/encode.js';

export type SplitRuleKind = 'key' | 'prefix' | 'pattern';

/** A rule as RESPOOL SPLIT, the admin API and the config give it. */
export type SplitRuleInput = { key?: string; prefix?: string; pattern?: string; copies?: number | null };

/** Rules kept at most (config + admin + auto-split). */
export const MAX_RULES = 1_000;
/** Keys auto-split adds at most. */
export const MAX_AUTO_SPLIT = 16;
/** Marker of copy names (placement.ts names copies `…{rpcopy:…}…`): keys containing it are never split themselves. */
export const COPY_MARKER = Buffer.from('{rpcopy:');


/** One configured (or added at run time) split rule. */
export interface SplitRule {
  kind: SplitRuleKind;
  /** The key, prefix or glob as given (UTF-8 text). */
  text: string;
  bytes: Buffer;
  /** Copies wanted, the original included; null = one per primary. */
  copies: number | null;
  /** Added by auto-split (detection above hotKeys.autoSplit.share). */
  auto: boolean;
  /** False while a fleet removes the rule: its copies are still written, no longer read. */
  reading: boolean;
}

/** One copy of a split key (copy 0 is the original key). */
export interface SplitCopy {
  name: Buffer;
  /** latin1 string of `name` (map key). */
  id: string;
  slot: number;
  /** Primary that owned `slot` when placed. */
  node: string;
  /** `GET <name>` pre-encoded: the most common split read needs no encoding. */
  getRaw: Buffer;
}

export function makeCopy(name: Buffer, node: string): SplitCopy {
  return {
    name,
    id: name.toString('latin1'),
    slot: calculateSlot(name),
    node,
    getRaw: encodeCommand(['GET', name]),
  };
}

/** A concrete split key: its copies and the state of their upkeep. */
export class SplitKey {
  readonly id: string;
  readonly original: SplitCopy;
  /** Copies reads may use (original first). */
  active: SplitCopy[];
  /** Copies being populated after a (re)placement; written to, not read from yet. */
  pending: SplitCopy[] = [];
  /** Round-robin cursor for reads. */
  cursor = 0;
  /** Writes started (for repairs: a repair is valid only if no write started meanwhile). */
  writeSeq = 0;
  /** Writes in flight. */
  inflightWrites = 0;
  /** Copy ids being repaired now. */
  readonly repairing = new Set<string>();
  /** Bumped on every placement; a stale placement round does not install its result. */
  generation = 0;
  /** "name@node,..." of the last placement (skip work when a topology change does not touch it). */
  signature = '';
  /**
   * Until when reads may use the copies (ms since the epoch): set by a fill (the fill's start +
   * hotKeys.maxCopyAge; Infinity without a bound), 0 until the first one. Past it reads go to the
   * original until the next fill (copy-fill.ts).
   */
  readableUntil = 0;
  /** Fills holding back writes to this key now: fill id → when the hold began. */
  readonly holds = new Map<string, number>();
  /** Writes waiting for the holds to end, oldest first (bounded: copy-fill.ts MAX_PARKED). */
  parked: Array<() => void> = [];
  /** When this instance last asked for a fill of this key. */
  fillAskedAt = 0;

  constructor(readonly key: Buffer, readonly rule: SplitRule) {
    this.id = key.toString('latin1');
    this.original = makeCopy(key, '');
    this.active = [this.original];
  }

  /** Copies wanted on a cluster of `primaries` primaries. */
  wanted(primaries: number): number {
    return Math.max(1, this.rule.copies ?? primaries);
  }

  /** Everything a write must reach: active and pending copies. */
  writeTargets(): SplitCopy[] {
    return this.pending.length === 0 ? this.active : [...this.active, ...this.pending];
  }
}

/** A request's args with args[at] replaced by `name`, as RESP. */
export function rewriteKey(args: readonly Buffer[], at: number, name: Buffer): Buffer {
  const copy = args.slice();
  copy[at] = name;
  return encodeCommand(copy);
}

/**
 * The copy one read goes to. Round-robin (the default) visits the copies in turn per split key,
 * so over any n reads each copy gets n/N ± 1; random choice drifts by ~sqrt(n) (measured in
 * test/unit/hotkeys-core.test.ts).
 */
export function pickCopy(split: SplitKey, random: boolean): SplitCopy {
  const copies = split.active;
  const n = copies.length;
  if (n === 1) return copies[0]!;
  if (random) return copies[Math.floor(Math.random() * n)]!;
  let i = split.cursor + 1;
  if (i >= n) i = 0;
  split.cursor = i;
  return copies[i]!;
}

/** A split rule's input checked: exactly one of key/prefix/pattern, copies 1..1024 or null. */
export function checkRule(input: SplitRuleInput): { kind: SplitRuleKind; text: string; copies: number | null } {
  const given = (['key', 'prefix', 'pattern'] as const).filter((k) => typeof input[k] === 'string');
  if (given.length !== 1) throw new Error('give exactly one of key, prefix or pattern');
  const kind: SplitRuleKind = given[0]!;
  const text = input[kind]!;
  if (text === '') throw new Error(`${kind} must not be empty`);
  const copies = input.copies ?? null;
  if (copies !== null && (!Number.isInteger(copies) || copies < 1 || copies > 1024)) {
    throw new Error(`copies must be an integer from 1 to 1024 (got ${copies})`);
  }
  return { kind, text, copies };
}
