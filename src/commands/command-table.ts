// The command table: name → flags, tips, key positions. Built from the generated
// builtin-commands.json (valkey 8 `COMMAND`) or from a live upstream's `COMMAND` reply.
//
// Hot path: every request does lookup(args) + keyIndexes(spec, args). lookup() never creates a
// string: it hashes the name bytes case-insensitively into an open-addressing table
// (name-index.ts), and does the same with args[1] for container commands. keyIndexes() calls a
// key finder compiled once per command (key-specs.ts).

import { readFileSync } from 'node:fs';
import type { RespValue } from '../resp/decode.js';
import type { RequestFrame } from '../resp/request-framer.js';
import { BUILTIN_COMMANDS_FILE } from '../own-files.js';
import { CommandFlag, commandFlagBit } from './command-flags.js';
import { NameIndex } from './name-index.js';
import { ProxyError } from '../errors.js';
import {
  compileCountKeyFinder,
  compileKeyFinder,
  findKeyRefs,
  makeKeySpec,
  NATIVE_GETKEYS,
  type BeginSearch,
  type CountKeyFinder,
  type FindKeys,
  type KeyFinder,
  type KeyRef,
  type KeySpec,
  type LegacyKeyRange,
} from './key-specs.js';

export type { KeySpec, KeyRef, LegacyKeyRange, BeginSearch, FindKeys } from './key-specs.js';

/**
 * Commands Valkey flags MAY_REPLICATE without saying so: `COMMAND` hides that flag on purpose
 * (server.c addReplyFlagsForCommand), so it is taken from Valkey 8.0.1's commands.def. CLIENT
 * PAUSE WRITE holds them (client/client-pause.ts).
 */
const HIDDEN_MAY_REPLICATE: ReadonlySet<string> = new Set(['cluster|setslot', 'pfcount', 'publish', 'spublish', 'eval', 'evalsha', 'fcall']);

export interface CommandSpec {
  /** Lower case; subcommands as "client|setname". */
  name: string;
  /** Valkey arity: the exact argument count including the name, or -N for "at least N". */
  arity: number;
  /** CommandFlag bits. */
  flags: number;
  /** Command tips, e.g. "request_policy:all_shards", "nondeterministic_output". */
  tips: string[];
  keySpecs: KeySpec[];
  /** Container commands only: subcommand name in lower case ("setname") → spec. */
  subcommands?: Map<string, CommandSpec>;

  // respool extras; optional so that hand-built specs (tests) stay valid.
  /** Flag names as Valkey spells them ("write", "denyoom", ...), including ones without a bit. */
  flagNames?: string[];
  /** ACL categories ("@read", "@string", ...). */
  aclCategories?: string[];
  /** The pre-7 (first, last, step) triple, used when a command has no key specs. */
  legacyKeys?: LegacyKeyRange;
  /** The container of a subcommand. */
  parent?: CommandSpec;
  /** Key finder compiled from keySpecs (set by CommandTable; internal). */
  findKeys?: KeyFinder;
  /** The same from the argument count alone, when its keys sit at fixed places; else null (set by CommandTable; internal). */
  keysByCount?: CountKeyFinder | null;
  /** Whether renaming its fixed keys is all key-name rewriting does to it (set by keys/naming-plan.ts on first use; internal). */
  onlyFixedKeys?: boolean;
  /** Subcommands by name bytes, case-insensitive (set by CommandTable; internal). */
  subcommandIndex?: NameIndex<CommandSpec>;
  /** Its latency histogram (set by observe/command-latency.ts on first use; internal). */
  latency?: object;
}

/**
 * Valkey's arity rule (server.c processCommand): `arity` N is exactly N arguments with the name,
 * -N at least N. The one place it is written; admission (handlers/admission.ts) asks here.
 */
export function wrongArity(spec: Pick<CommandSpec, 'arity'>, argc: number): boolean {
  return (spec.arity > 0 && spec.arity !== argc) || argc < -spec.arity;
}

/** An arity rule: the table's for a command, or one of respool's own commands (RESPOOL, COMMANDLOG). */
export interface ArityRule {
  /** Lower case; subcommands as "respool|fleet". */
  readonly name: string;
  /** Valkey's convention: N exactly N arguments with the name, -N at least N. */
  readonly arity: number;
}

/**
 * Valkey's wrong-arity error for `argc` arguments, or null. Admission (handlers/admission.ts)
 * asks it for every request; respool's own commands and a command named inside another (ACL
 * DRYRUN's) ask it directly.
 */
export function arityError(rule: ArityRule, argc: number): string | null {
  return wrongArity(rule, argc) ? ProxyError.wrongArity(rule.name) : null;
}

/** One command as listed by `COMMAND` (subcommands are separate entries named "parent|sub"). */
export interface CommandInfoEntry {
  name: string;
  arity: number;
  flags: string[];
  first: number;
  last: number;
  step: number;
  acl: string[];
  tips: string[];
  /** undefined when the server did not report key specs at all (Redis < 7). */
  keySpecs: KeySpec[] | undefined;
}

let builtinTable: CommandTable | undefined;

export class CommandTable {
  /** Top-level commands by name bytes, case-insensitive. */
  private readonly index = new NameIndex<CommandSpec>();
  /** Every command and subcommand by lower-case full name ("get", "client|setname"). */
  private readonly byFullName = new Map<string, CommandSpec>();
  private readonly fallbackFinders = new WeakMap<CommandSpec, KeyFinder>();

  /** Where the table came from ("valkey 8.0.1 COMMAND ...", "COMMAND reply"). */
  readonly source: string;

  constructor(entries: Iterable<CommandInfoEntry>, source = 'custom') {
    this.source = source;
    const subs: CommandInfoEntry[] = [];
    for (const e of entries) {
      if (e.name.includes('|')) subs.push(e);
      else this.add(e, undefined);
    }
    for (const e of subs) {
      const parentName = e.name.slice(0, e.name.indexOf('|'));
      let parent = this.byFullName.get(parentName);
      if (parent === undefined) {
        // A subcommand without its container (never from a real server): synthesize one.
        parent = this.add(
          { name: parentName, arity: -2, flags: [], first: 0, last: 0, step: 0, acl: [], tips: [], keySpecs: [] },
          undefined,
        );
      }
      this.add(e, parent);
    }
  }

  /** The table generated from valkey 8 (src/commands/builtin-commands.json); built once. */
  static builtin(): CommandTable {
    if (builtinTable === undefined) {
      const text = readFileSync(BUILTIN_COMMANDS_FILE, 'utf8');
      const data = JSON.parse(text) as { source?: string; commands: BuiltinJsonEntry[] };
      builtinTable = new CommandTable(data.commands.map(fromJsonEntry), data.source ?? 'builtin');
    }
    return builtinTable;
  }

  /**
   * A table from a live server's `COMMAND` or `COMMAND INFO ...` reply, RESP2 or RESP3 (bulk
   * strings as Buffer, simple strings as string, key specs as flat arrays or Maps). Entries that
   * are null (unknown names in COMMAND INFO) are skipped. When the server reports no key specs
   * at all (Redis < 7) the built-in key specs of the same command are used, if any, else the
   * legacy (first, last, step). Throws when the reply is not an array.
   */
  static fromCommandInfo(reply: RespValue): CommandTable {
    if (!Array.isArray(reply)) throw new TypeError('COMMAND reply is not an array');
    const entries: CommandInfoEntry[] = [];
    for (const item of reply) parseInfoEntry(item, entries);
    let builtin: CommandTable | undefined;
    for (const e of entries) {
      if (e.keySpecs === undefined) {
        builtin ??= CommandTable.builtin();
        const known = builtin.get(e.name);
        if (known !== undefined && known.keySpecs.length > 0) e.keySpecs = known.keySpecs;
      }
    }
    return new CommandTable(entries, 'COMMAND reply');
  }

  /**
   * The spec for a request, by args[0] (case-insensitive). For container commands (CLIENT,
   * CONFIG, OBJECT, XINFO, ...) args[1] selects the subcommand ("client|setname"); an unknown
   * or missing subcommand gives the container's own spec.
   */
  lookup(args: readonly Buffer[]): CommandSpec | undefined {
    const a0 = args[0];
    if (a0 === undefined) return undefined;
    const spec = this.index.get(a0);
    if (spec === undefined) return undefined;
    const subs = spec.subcommandIndex;
    if (subs !== undefined && args.length > 1) return subs.get(args[1]!) ?? spec;
    return spec;
  }

  /**
   * Indexes into args of the arguments that decide the hash slot: the keys, as Valkey's key
   * specs (or legacy first/last/step) locate them, plus the shard channel of SPUBLISH /
   * SSUBSCRIBE / SUNSUBSCRIBE. Empty for keyless commands and for malformed arguments (bad
   * numkeys, ...) that the server will reject. See key-specs.ts for the exact rules.
   */
  /** As lookup(), straight from a request's bytes: no argument views are made (resp/request-framer.ts). */
  lookupFrame(frame: RequestFrame): CommandSpec | undefined {
    if (frame.argCount === 0) return undefined;
    const spec = this.index.getIn(frame.argBuffer(0), frame.argStart(0), frame.argEnd(0));
    if (spec === undefined) return undefined;
    const subs = spec.subcommandIndex;
    if (subs !== undefined && frame.argCount > 1) return subs.getIn(frame.argBuffer(1), frame.argStart(1), frame.argEnd(1)) ?? spec;
    return spec;
  }

  keyIndexes(spec: CommandSpec, args: readonly Buffer[]): number[] {
    const finder = spec.findKeys;
    if (finder !== undefined) return finder(args);
    let f = this.fallbackFinders.get(spec);
    if (f === undefined) {
      f = compileKeyFinder({ name: spec.name, arity: spec.arity, keySpecs: spec.keySpecs, legacyKeys: spec.legacyKeys });
      this.fallbackFinders.set(spec, f);
    }
    return f(args);
  }

  /** Like keyIndexes(), with the KeySpecFlag bits of each key (RO/RW/..., see KeySpec.write). */
  keyRefs(spec: CommandSpec, args: readonly Buffer[]): KeyRef[] {
    return findKeyRefs({ name: spec.name, arity: spec.arity, keySpecs: spec.keySpecs, legacyKeys: spec.legacyKeys }, args);
  }

  /** A command or subcommand by full name, case-insensitive ("GET", "client|setname"). */
  get(name: string): CommandSpec | undefined {
    return this.byFullName.get(name) ?? this.byFullName.get(name.toLowerCase());
  }

  /** Every full name, commands and subcommands ("client", "client|setname", ...), sorted. */
  names(): string[] {
    return [...this.byFullName.keys()].sort();
  }

  /** Top-level commands (each with its subcommands map). */
  *commands(): IterableIterator<CommandSpec> {
    for (const spec of this.byFullName.values()) if (spec.parent === undefined) yield spec;
  }

  /** Number of commands and subcommands. */
  get size(): number {
    return this.byFullName.size;
  }

  private add(e: CommandInfoEntry, parent: CommandSpec | undefined): CommandSpec {
    const name = e.name.toLowerCase();
    let flags = 0;
    for (const f of e.flags) flags |= commandFlagBit(f);
    if (HIDDEN_MAY_REPLICATE.has(name)) flags |= CommandFlag.MAY_REPLICATE;
    const keySpecs = e.keySpecs ?? [];
    const legacyKeys: LegacyKeyRange = { first: e.first, last: e.last, step: e.step };
    const spec: CommandSpec = {
      name,
      arity: e.arity,
      flags,
      tips: e.tips,
      keySpecs,
      flagNames: e.flags,
      aclCategories: e.acl,
      legacyKeys,
      // Every field a spec can get, set here: specs keep one shape (V8 map), so the request path's
      // reads of them stay monomorphic when some are filled on first use (onlyFixedKeys, latency).
      parent,
      subcommands: undefined,
      findKeys: compileKeyFinder({ name, arity: e.arity, keySpecs, legacyKeys }),
      keysByCount: compileCountKeyFinder({ name, arity: e.arity, keySpecs, legacyKeys }),
      onlyFixedKeys: undefined,
      subcommandIndex: undefined,
      latency: undefined,
    };
    this.byFullName.set(name, spec);
    if (parent === undefined) {
      this.index.set(name, spec);
    } else {
      const sub = name.slice(name.indexOf('|') + 1);
      (parent.subcommands ??= new Map()).set(sub, spec);
      (parent.subcommandIndex ??= new NameIndex()).set(sub, spec);
    }
    return spec;
  }
}

/** True when the command can have key arguments (key specs, legacy range or a native parser). */
export function commandMayHaveKeys(spec: CommandSpec): boolean {
  return spec.keySpecs.length > 0 || (spec.legacyKeys?.first ?? 0) > 0 || NATIVE_GETKEYS.has(spec.name);
}

// ---------------------------------------------------------------------------------------------
// builtin-commands.json (written by scripts/gen-command-table.mjs)

/** A command as the JSON file lists it: COMMAND's fields, with key specs spelt as Valkey's COMMAND DOCS does. */
interface BuiltinJsonEntry extends Omit<CommandInfoEntry, 'keySpecs'> {
  key_specs: Array<{
    flags: string[];
    begin_search: { type: string; index?: number; keyword?: string; startfrom?: number };
    find_keys: { type: string; lastkey?: number; keystep?: number; limit?: number; keynumidx?: number; firstkey?: number };
  }>;
}

function fromJsonEntry(j: BuiltinJsonEntry): CommandInfoEntry {
  return {
    name: j.name,
    arity: j.arity,
    flags: j.flags,
    first: j.first,
    last: j.last,
    step: j.step,
    acl: j.acl,
    tips: j.tips,
    keySpecs: j.key_specs.map((k) =>
      makeKeySpec(k.flags, toBeginSearch(k.begin_search.type, k.begin_search), toFindKeys(k.find_keys.type, k.find_keys)),
    ),
  };
}

// ---------------------------------------------------------------------------------------------
// Decoded COMMAND reply

function toBeginSearch(type: string, f: { index?: unknown; keyword?: unknown; startfrom?: unknown }): BeginSearch {
  if (type === 'index') return { type: 'index', index: num(f.index) };
  if (type === 'keyword') return { type: 'keyword', keyword: str(f.keyword), startFrom: num(f.startfrom) };
  return { type: 'unknown' };
}

function toFindKeys(
  type: string,
  f: { lastkey?: unknown; keystep?: unknown; limit?: unknown; keynumidx?: unknown; firstkey?: unknown },
): FindKeys {
  if (type === 'range') return { type: 'range', lastKey: num(f.lastkey), keyStep: num(f.keystep), limit: num(f.limit) };
  if (type === 'keynum') {
    return { type: 'keynum', keyNumIdx: num(f.keynumidx), firstKey: num(f.firstkey), keyStep: num(f.keystep) };
  }
  return { type: 'unknown' };
}

function str(v: unknown): string {
  if (typeof v === 'string') return v;
  if (Buffer.isBuffer(v)) return v.toString('utf8');
  if (typeof v === 'number') return String(v);
  return '';
}

function num(v: unknown): number {
  if (typeof v === 'number') return v;
  if (typeof v === 'string' || Buffer.isBuffer(v)) {
    const n = Number(v.toString());
    return Number.isFinite(n) ? n : 0;
  }
  return 0;
}

function strList(v: unknown): string[] {
  if (Array.isArray(v)) return v.map(str);
  if (v instanceof Set) return [...v].map(str); // tolerate decoders that keep RESP3 sets as Set
  return [];
}

/** A RESP3 map (Map) or a RESP2 flat key/value array → plain record with string keys. */
function fields(v: unknown): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (v instanceof Map) {
    for (const [k, val] of v) out[str(k)] = val;
  } else if (Array.isArray(v)) {
    for (let i = 0; i + 1 < v.length; i += 2) out[str(v[i])] = v[i + 1];
  }
  return out;
}

function parseKeySpecValue(v: unknown): KeySpec {
  const ks = fields(v);
  const bs = fields(ks['begin_search']);
  const fk = fields(ks['find_keys']);
  return makeKeySpec(
    strList(ks['flags']),
    toBeginSearch(str(bs['type']), fields(bs['spec'])),
    toFindKeys(str(fk['type']), fields(fk['spec'])),
  );
}

function parseInfoEntry(item: unknown, out: CommandInfoEntry[]): void {
  if (!Array.isArray(item) || item.length < 6) return;
  const name = str(item[0]).toLowerCase();
  if (name === '') return;
  out.push({
    name,
    arity: num(item[1]),
    flags: strList(item[2]),
    first: num(item[3]),
    last: num(item[4]),
    step: num(item[5]),
    acl: strList(item[6]),
    tips: strList(item[7]),
    keySpecs: item.length > 8 && Array.isArray(item[8]) ? item[8].map(parseKeySpecValue) : undefined,
  });
  if (item.length > 9 && Array.isArray(item[9])) for (const sub of item[9]) parseInfoEntry(sub, out);
}
