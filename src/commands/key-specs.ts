// Evaluation of Valkey key specifications against a request's arguments.
//
// Semantics follow Valkey's `getKeysUsingKeySpecs()` / `getKeysFromCommandWithSpecs()` (db.c)
// and the "Command key specifications" documentation:
//
//   begin_search  index {index}              → first = index
//                 keyword {keyword, startfrom} → scan for the keyword (case-insensitive) from
//                     startfrom towards the end (startfrom > 0, up to argc-2) or from argc+startfrom
//                     backwards down to index 2 (startfrom < 0); first = position after it. Keyword
//                     not found → the spec yields no keys (not an error).
//                 unknown                      → cannot be resolved from the spec alone
//   find_keys     range {lastkey, keystep, limit}
//                     lastkey >= 0 → last = first + lastkey
//                     lastkey < 0, limit 0 → last = argc + lastkey
//                     lastkey = -1, limit n → last = first + floor((argc - first) / n) - 1
//                 keynum {keynumidx, firstkey, keystep}
//                     numkeys = strict integer at first + keynumidx (invalid or < 0 → error);
//                     first += firstkey; last = first + numkeys - 1
//                 unknown                      → cannot be resolved
//   last >= argc, last < first or first >= argc → a syntax error: the whole command yields no keys.
//
// `args[0]` is the command name; for subcommands the indexes are relative to the full args
// ("OBJECT ENCODING key" → [2]), exactly as Valkey stores them.
//
// Deliberate choices (documented in the report and tested against `COMMAND GETKEYS`):
//  * Specs flagged NOT_KEY (the shard channel of SPUBLISH / SSUBSCRIBE / SUNSUBSCRIBE) ARE
//    returned: the indexes are "what decides the hash slot", and Valkey's cluster routing hashes
//    those channels too (`getNodeByQuery` → legacy range 1..1). `COMMAND GETKEYS` skips them.
//  * When the specs cannot resolve the keys (an `unknown` spec, or an INCOMPLETE spec that
//    matched), a command-specific parser mirrors Valkey's native getkeys procs: SORT (sort key +
//    last STORE destination; BY/GET patterns are not keys, as in Valkey), SORT_RO (sort key),
//    MIGRATE (key at 3, or the keys after KEYS when key is ""), PFMERGE with no source (its
//    destkey, which Valkey's spec walk misses). Unknown commands with unresolvable
//    specs (modules) get the keys of the specs that did resolve: best effort, possibly incomplete.
//  * When a spec reports a syntax error (bad numkeys, out-of-range positions), no keys are
//    returned, as Valkey does; the server will reply with the error. Valkey then runs its native
//    proc, which parses numkeys with atoi ("3abc" → 3); we do not mimic that quirk: such a command
//    fails on the server anyway.
//  * VARIABLE_FLAGS (SET, BITFIELD) changes only the flags, never the positions; the spec flags
//    are kept as declared (the most permissive ones, e.g. RW for SET).

import { KeySpecFlag, KEY_SPEC_WRITE_MASK, parseKeySpecFlags } from './command-flags.js';

export type BeginSearch =
  | { readonly type: 'index'; readonly index: number }
  | { readonly type: 'keyword'; readonly keyword: string; readonly startFrom: number }
  | { readonly type: 'unknown' };

export type FindKeys =
  | { readonly type: 'range'; readonly lastKey: number; readonly keyStep: number; readonly limit: number }
  | { readonly type: 'keynum'; readonly keyNumIdx: number; readonly firstKey: number; readonly keyStep: number }
  | { readonly type: 'unknown' };

export interface KeySpec {
  /** KeySpecFlag bits (RO, RW, OW, RM, ACCESS, UPDATE, INSERT, DELETE, NOT_KEY, INCOMPLETE, VARIABLE_FLAGS). */
  readonly flags: number;
  /** True when the keys found by this spec may be modified (RW/OW/RM/UPDATE/INSERT/DELETE). */
  readonly write: boolean;
  readonly beginSearch: BeginSearch;
  readonly findKeys: FindKeys;
}

/** The pre-7 (first, last, step) triple of `COMMAND`: last < 0 counts from the end. */
export interface LegacyKeyRange {
  readonly first: number;
  readonly last: number;
  readonly step: number;
}

/** A key argument with the flags of the spec (or native parser) that found it. */
export interface KeyRef {
  index: number;
  flags: number;
}

/** Returns a fresh array of key indexes into `args` (may be empty). */
export type KeyFinder = (args: readonly Buffer[]) => number[];

/** What a finder needs to know about a command. */
export interface KeyFinderInput {
  readonly name: string;
  readonly arity: number;
  readonly keySpecs: readonly KeySpec[];
  readonly legacyKeys?: LegacyKeyRange;
}

// ---------------------------------------------------------------------------------------------
// Construction

/** Builds a KeySpec from Valkey's field names (JSON file or decoded COMMAND reply). */
export function makeKeySpec(
  flagNames: Iterable<string>,
  beginSearch: BeginSearch,
  findKeys: FindKeys,
): KeySpec {
  const flags = parseKeySpecFlags(flagNames);
  return { flags, write: (flags & KEY_SPEC_WRITE_MASK) !== 0, beginSearch, findKeys };
}

// ---------------------------------------------------------------------------------------------
// Byte helpers

function lowerAscii(c: number): number {
  return c >= 0x41 && c <= 0x5a ? c | 0x20 : c;
}

/** `arg` equals `lower` (already lower-case ASCII bytes), ignoring ASCII case. */
function eqIgnoreCase(arg: Buffer, lower: Buffer): boolean {
  const n = lower.length;
  if (arg.length !== n) return false;
  for (let i = 0; i < n; i++) if (lowerAscii(arg[i]!) !== lower[i]) return false;
  return true;
}

const KW = (s: string): Buffer => Buffer.from(s.toLowerCase(), 'latin1');

/**
 * Valkey's string2ll restricted to what a key count can be: "0" or [1-9][0-9]*, no sign, no
 * spaces, no leading zeros. Returns -1 when invalid or negative (both are errors for keynum).
 * Values above 2^31 are returned as-is; they are out of range for any real argument list.
 */
function parseNumKeys(b: Buffer): number {
  const n = b.length;
  if (n === 0 || n > 15) return -1;
  const c0 = b[0]!;
  if (c0 === 0x30) return n === 1 ? 0 : -1;
  if (c0 < 0x31 || c0 > 0x39) return -1;
  let v = c0 - 0x30;
  for (let i = 1; i < n; i++) {
    const c = b[i]!;
    if (c < 0x30 || c > 0x39) return -1;
    v = v * 10 + (c - 0x30);
  }
  return v;
}

// ---------------------------------------------------------------------------------------------
// Generic evaluation (Valkey's algorithm)

const ST_OK = 0;
/** An `unknown` spec, or an INCOMPLETE spec that found its keyword: keys may be missing. */
const ST_UNRESOLVED = 1;
/** A syntax error in the arguments: Valkey discards every key. */
const ST_INVALID = 2;

interface CompiledSpec {
  readonly spec: KeySpec;
  readonly keyword: Buffer | null;
}

function compileSpecs(specs: readonly KeySpec[]): CompiledSpec[] {
  return specs.map((spec) => ({
    spec,
    keyword: spec.beginSearch.type === 'keyword' ? KW(spec.beginSearch.keyword) : null,
  }));
}

function evalSpecs(specs: readonly CompiledSpec[], args: readonly Buffer[], out: number[], outFlags: number[] | null): number {
  const argc = args.length;
  let status = ST_OK;
  for (let s = 0; s < specs.length; s++) {
    const { spec, keyword } = specs[s]!;
    const bs = spec.beginSearch;
    let first = 0;
    if (bs.type === 'index') {
      first = bs.index;
    } else if (bs.type === 'keyword') {
      const start = bs.startFrom > 0 ? bs.startFrom : argc + bs.startFrom;
      const end = bs.startFrom > 0 ? argc - 1 : 1;
      const up = start <= end;
      for (let i = start; i !== end; i = up ? i + 1 : i - 1) {
        if (i >= argc || i < 1) break;
        if (eqIgnoreCase(args[i]!, keyword!)) {
          first = i + 1;
          break;
        }
      }
      if (first === 0) continue; // keyword absent: this spec has no keys
    } else {
      status = ST_UNRESOLVED;
      continue;
    }

    const fk = spec.findKeys;
    let last: number;
    let step: number;
    if (fk.type === 'range') {
      step = fk.keyStep;
      if (fk.lastKey >= 0) last = first + fk.lastKey;
      else if (fk.limit === 0) last = argc + fk.lastKey;
      else last = first + (Math.floor((argc - first) / fk.limit) + fk.lastKey);
    } else if (fk.type === 'keynum') {
      step = fk.keyStep;
      const at = first + fk.keyNumIdx;
      if (at >= argc) return ST_INVALID;
      const numKeys = parseNumKeys(args[at]!);
      if (numKeys < 0) return ST_INVALID;
      first += fk.firstKey;
      last = first + numKeys - 1;
    } else {
      status = ST_UNRESOLVED;
      continue;
    }

    if (last >= argc || last < first || first >= argc) return ST_INVALID;
    if (step < 1) step = 1;
    for (let i = first; i <= last; i += step) {
      out.push(i);
      if (outFlags !== null) outFlags.push(spec.flags);
    }
    if (spec.flags & KeySpecFlag.INCOMPLETE) status = ST_UNRESOLVED;
  }
  return status;
}

// ---------------------------------------------------------------------------------------------
// Native parsers for commands whose specs cannot resolve their keys (Valkey's getkeys procs)

type NativeGetKeys = (args: readonly Buffer[]) => KeyRef[];

const K_LIMIT = KW('limit');
const K_GET = KW('get');
const K_BY = KW('by');
const K_STORE = KW('store');
const K_KEYS = KW('keys');
const K_COPY = KW('copy');
const K_REPLACE = KW('replace');
const K_AUTH = KW('auth');
const K_AUTH2 = KW('auth2');

/** SORT key [BY p] [LIMIT o c] [GET p ...] [ASC|DESC] [ALPHA] [STORE dest]: the last STORE wins. */
function sortGetKeys(args: readonly Buffer[]): KeyRef[] {
  const argc = args.length;
  const out: KeyRef[] = [{ index: 1, flags: KeySpecFlag.RO | KeySpecFlag.ACCESS }];
  let store = -1;
  for (let i = 2; i < argc; i++) {
    const a = args[i]!;
    if (eqIgnoreCase(a, K_LIMIT)) i += 2;
    else if (eqIgnoreCase(a, K_STORE) && i + 1 < argc) store = i + 1;
    else if (eqIgnoreCase(a, K_GET) || eqIgnoreCase(a, K_BY)) i += 1;
  }
  if (store > 0) out.push({ index: store, flags: KeySpecFlag.OW | KeySpecFlag.UPDATE });
  return out;
}

function sortRoGetKeys(): KeyRef[] {
  return [{ index: 1, flags: KeySpecFlag.RO | KeySpecFlag.ACCESS }];
}

/** MIGRATE host port key|"" db timeout [COPY] [REPLACE] [AUTH pw] [AUTH2 user pw] [KEYS k ...]. */
function migrateGetKeys(args: readonly Buffer[]): KeyRef[] {
  const argc = args.length;
  const flags = KeySpecFlag.RW | KeySpecFlag.ACCESS | KeySpecFlag.DELETE;
  let first = 3;
  let num = 1;
  if (argc > 6) {
    for (let i = 6; i < argc; i++) {
      const a = args[i]!;
      if (eqIgnoreCase(a, K_KEYS)) {
        if (args[3]!.length > 0) num = 0; // syntax error: leave it to the server
        else {
          first = i + 1;
          num = argc - first;
        }
        break;
      }
      if (eqIgnoreCase(a, K_COPY) || eqIgnoreCase(a, K_REPLACE)) continue;
      if (eqIgnoreCase(a, K_AUTH)) i += 1;
      else if (eqIgnoreCase(a, K_AUTH2)) i += 2;
    }
  }
  if (argc <= 3) num = 0;
  const out: KeyRef[] = [];
  for (let i = 0; i < num; i++) out.push({ index: first + i, flags });
  return out;
}

/**
 * PFMERGE destkey [sourcekey ...] with no source: its second spec (a range from index 2) finds
 * nothing, so Valkey's spec walk calls the whole command invalid and it routes and ACL-checks as
 * keyless — yet it creates destkey. Here destkey is its key: routed to its slot, and under a
 * namespace or a colocation rule renamed, so it cannot land in another namespace.
 */
function pfmergeGetKeys(args: readonly Buffer[]): KeyRef[] {
  return args.length === 2 ? [{ index: 1, flags: KeySpecFlag.RW | KeySpecFlag.ACCESS | KeySpecFlag.INSERT }] : [];
}

/** Command name (lower case) → native parser. */
export const NATIVE_GETKEYS: ReadonlyMap<string, NativeGetKeys> = new Map<string, NativeGetKeys>([
  ['sort', sortGetKeys],
  ['sort_ro', sortRoGetKeys],
  ['migrate', migrateGetKeys],
  ['pfmerge', pfmergeGetKeys],
]);

function refsToIndexes(refs: KeyRef[]): number[] {
  const out = new Array<number>(refs.length);
  for (let i = 0; i < refs.length; i++) out[i] = refs[i]!.index;
  return out;
}

// ---------------------------------------------------------------------------------------------
// Legacy (first, last, step)

function legacyRefs(legacy: LegacyKeyRange | undefined, args: readonly Buffer[]): KeyRef[] {
  if (legacy === undefined || legacy.first <= 0) return [];
  const argc = args.length;
  const first = legacy.first;
  const last = legacy.last >= 0 ? legacy.last : argc + legacy.last;
  const step = legacy.step >= 1 ? legacy.step : 1;
  if (last >= argc || last < first) return [];
  const out: KeyRef[] = [];
  for (let i = first; i <= last; i += step) out.push({ index: i, flags: 0 });
  return out;
}

// ---------------------------------------------------------------------------------------------
// Public API

/**
 * Key arguments of one request with the flags of the spec that found each (slow path: allocates
 * one object per key). Same positions, in the same order, as the finder from compileKeyFinder().
 */
export function findKeyRefs(cmd: KeyFinderInput, args: readonly Buffer[]): KeyRef[] {
  if (cmd.keySpecs.length === 0) return legacyRefs(cmd.legacyKeys, args);
  const idx: number[] = [];
  const flags: number[] = [];
  const st = evalSpecs(compileSpecs(cmd.keySpecs), args, idx, flags);
  if (st !== ST_OK) {
    const native = NATIVE_GETKEYS.get(cmd.name);
    if (native !== undefined) return native(args);
    if (st === ST_INVALID) return [];
  }
  const out: KeyRef[] = [];
  for (let i = 0; i < idx.length; i++) out.push({ index: idx[i]!, flags: flags[i]! });
  return out;
}

const SIMPLE_FLAGS_MASK = KeySpecFlag.INCOMPLETE;

/** Key indexes from the argument count alone: the commands whose keys sit at fixed places (see compileCountKeyFinder). */
export type CountKeyFinder = (argCount: number) => number[];

/**
 * Compiles the key specs of a command into a function from args to key indexes. Common shapes
 * get a dedicated closure: one key at a fixed index (GET, SET, HSET, ... ~75% of commands) and
 * one index+range spec (MGET, DEL, MSET with step 2). Everything else runs Valkey's algorithm.
 */
export function compileKeyFinder(cmd: KeyFinderInput): KeyFinder {
  const specs = cmd.keySpecs;
  const native = NATIVE_GETKEYS.get(cmd.name);

  if (specs.length === 0) {
    const legacy = cmd.legacyKeys;
    if (legacy === undefined || legacy.first <= 0) return () => [];
    return (args) => refsToIndexes(legacyRefs(legacy, args));
  }

  const byCount = compileCountKeyFinder(cmd);
  if (byCount !== null) return (args) => byCount(args.length);

  const compiled = compileSpecs(specs);
  return (args) => {
    const out: number[] = [];
    const st = evalSpecs(compiled, args, out, null);
    if (st === ST_OK) return out;
    if (native !== undefined) return refsToIndexes(native(args));
    return st === ST_INVALID ? [] : out; // unresolvable (module) specs: best effort
  };
}

/**
 * The key finder of a command whose keys the argument count alone places — one index+range key
 * spec, no native parser — or null. Such requests can have their keys found (and renamed:
 * keys/prefixed-request.ts) without a view of any argument.
 */
export function compileCountKeyFinder(cmd: KeyFinderInput): CountKeyFinder | null {
  const specs = cmd.keySpecs;
  if (specs.length !== 1 || NATIVE_GETKEYS.has(cmd.name)) return null;
  const spec = specs[0]!;
  const bs = spec.beginSearch;
  const fk = spec.findKeys;
  if (bs.type !== 'index' || fk.type !== 'range' || fk.limit !== 0 || (spec.flags & SIMPLE_FLAGS_MASK) !== 0) return null;
  const first = bs.index;
  const step = fk.keyStep >= 1 ? fk.keyStep : 1;
  if (fk.lastKey === 0) {
    // One key at a fixed position.
    return (argc) => (first < argc ? [first] : []);
  }
  if (fk.lastKey > 0) {
    const lastRel = fk.lastKey;
    return (argc) => {
      const last = first + lastRel;
      if (last >= argc) return [];
      const out: number[] = [];
      for (let i = first; i <= last; i += step) out.push(i);
      return out;
    };
  }
  const fromEnd = fk.lastKey; // < 0
  if (step === 1) {
    return (argc) => {
      const last = argc + fromEnd;
      if (last < first || first >= argc) return [];
      const n = last - first + 1;
      const out = new Array<number>(n);
      for (let i = 0; i < n; i++) out[i] = first + i;
      return out;
    };
  }
  return (argc) => {
    const last = argc + fromEnd;
    if (last < first || first >= argc) return [];
    const out: number[] = [];
    for (let i = first; i <= last; i += step) out.push(i);
    return out;
  };
}
