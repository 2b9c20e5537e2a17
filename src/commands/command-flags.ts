// Command flag bits and key-spec flag bits, with parsers from the names Valkey uses in the
// `COMMAND` / `COMMAND INFO` reply ("write", "readonly", ... for commands; "RW", "access", ...
// for key specifications). Bits are plain numbers so that `spec.flags & CommandFlag.WRITE` is a
// single integer operation on the hot path.

/** Command flags (Valkey `CMD_*`), one bit each. Unknown names are ignored by the parser. */
export const CommandFlag = {
  WRITE: 1 << 0,
  READONLY: 1 << 1,
  DENYOOM: 1 << 2,
  MODULE: 1 << 3,
  ADMIN: 1 << 4,
  PUBSUB: 1 << 5,
  NOSCRIPT: 1 << 6,
  BLOCKING: 1 << 7,
  LOADING: 1 << 8,
  STALE: 1 << 9,
  SKIP_MONITOR: 1 << 10,
  SKIP_SLOWLOG: 1 << 11,
  ASKING: 1 << 12,
  FAST: 1 << 13,
  NO_AUTH: 1 << 14,
  MAY_REPLICATE: 1 << 15,
  SENTINEL: 1 << 16,
  ONLY_SENTINEL: 1 << 17,
  NO_MANDATORY_KEYS: 1 << 18,
  PROTECTED: 1 << 19,
  MODULE_GETKEYS: 1 << 20,
  MODULE_GETCHANNELS: 1 << 21,
  NO_ASYNC_LOADING: 1 << 22,
  NO_MULTI: 1 << 23,
  MOVABLE_KEYS: 1 << 24,
  ALLOW_BUSY: 1 << 25,
  MODULE_NO_CLUSTER: 1 << 26,
  TOUCHES_ARBITRARY_KEYS: 1 << 27,
} as const;

/** Valkey's reply spelling → bit. */
const COMMAND_FLAG_BY_NAME: ReadonlyMap<string, number> = new Map<string, number>([
  ['write', CommandFlag.WRITE],
  ['readonly', CommandFlag.READONLY],
  ['denyoom', CommandFlag.DENYOOM],
  ['module', CommandFlag.MODULE],
  ['admin', CommandFlag.ADMIN],
  ['pubsub', CommandFlag.PUBSUB],
  ['noscript', CommandFlag.NOSCRIPT],
  ['blocking', CommandFlag.BLOCKING],
  ['loading', CommandFlag.LOADING],
  ['stale', CommandFlag.STALE],
  ['skip_monitor', CommandFlag.SKIP_MONITOR],
  ['skip_slowlog', CommandFlag.SKIP_SLOWLOG],
  ['asking', CommandFlag.ASKING],
  ['fast', CommandFlag.FAST],
  ['no_auth', CommandFlag.NO_AUTH],
  ['may_replicate', CommandFlag.MAY_REPLICATE],
  ['sentinel', CommandFlag.SENTINEL],
  ['only_sentinel', CommandFlag.ONLY_SENTINEL],
  ['no_mandatory_keys', CommandFlag.NO_MANDATORY_KEYS],
  ['protected', CommandFlag.PROTECTED],
  ['module_getkeys', CommandFlag.MODULE_GETKEYS],
  ['module_getchannels', CommandFlag.MODULE_GETCHANNELS],
  ['no_async_loading', CommandFlag.NO_ASYNC_LOADING],
  ['no_multi', CommandFlag.NO_MULTI],
  ['movablekeys', CommandFlag.MOVABLE_KEYS],
  ['allow_busy', CommandFlag.ALLOW_BUSY],
  ['module_no_cluster', CommandFlag.MODULE_NO_CLUSTER],
  ['touches_arbitrary_keys', CommandFlag.TOUCHES_ARBITRARY_KEYS],
]);

/** Bit for one Valkey flag name (case-insensitive), or 0 when unknown. */
export function commandFlagBit(name: string): number {
  return COMMAND_FLAG_BY_NAME.get(name) ?? COMMAND_FLAG_BY_NAME.get(name.toLowerCase()) ?? 0;
}

/** OR of the bits of Valkey flag names; unknown names are ignored. */
export function parseCommandFlags(names: Iterable<string>): number {
  let bits = 0;
  for (const n of names) bits |= commandFlagBit(n);
  return bits;
}

/** Valkey flag names of a bitmask (in bit order), for logs and the admin API. */
export function commandFlagNames(bits: number): string[] {
  const out: string[] = [];
  for (const [name, bit] of COMMAND_FLAG_BY_NAME) if (bits & bit) out.push(name);
  return out;
}

/** Key-spec flags (Valkey `CMD_KEY_*`). */
export const KeySpecFlag = {
  /** Read-only: reads the value but does not modify it. */
  RO: 1 << 0,
  /** Read-write: modifies the value and may also read it. */
  RW: 1 << 1,
  /** Overwrite: overwrites the value without reading it. */
  OW: 1 << 2,
  /** Remove: deletes the key. */
  RM: 1 << 3,
  /** The value is returned, copied or otherwise exposed to the user. */
  ACCESS: 1 << 4,
  /** Updates the value (e.g. SETRANGE). */
  UPDATE: 1 << 5,
  /** Adds data to the value without modifying existing data (e.g. LPUSH). */
  INSERT: 1 << 6,
  /** Deletes data from the value (e.g. LREM). */
  DELETE: 1 << 7,
  /** Not a key: a shard channel (SPUBLISH) that still hashes to a slot. */
  NOT_KEY: 1 << 8,
  /** The spec may not find every key (e.g. MIGRATE's KEYS); a command-specific parser is needed. */
  INCOMPLETE: 1 << 9,
  /** The flags depend on the arguments (SET ... GET, BITFIELD ... SET); positions do not. */
  VARIABLE_FLAGS: 1 << 10,
} as const;

/** Flags that mean "this key may be modified". ACCESS alone is a read. */
export const KEY_SPEC_WRITE_MASK =
  KeySpecFlag.RW | KeySpecFlag.OW | KeySpecFlag.RM | KeySpecFlag.UPDATE | KeySpecFlag.INSERT | KeySpecFlag.DELETE;

const KEY_SPEC_FLAG_BY_NAME: ReadonlyMap<string, number> = new Map<string, number>([
  ['ro', KeySpecFlag.RO],
  ['rw', KeySpecFlag.RW],
  ['ow', KeySpecFlag.OW],
  ['rm', KeySpecFlag.RM],
  ['access', KeySpecFlag.ACCESS],
  ['update', KeySpecFlag.UPDATE],
  ['insert', KeySpecFlag.INSERT],
  ['delete', KeySpecFlag.DELETE],
  ['not_key', KeySpecFlag.NOT_KEY],
  ['incomplete', KeySpecFlag.INCOMPLETE],
  ['variable_flags', KeySpecFlag.VARIABLE_FLAGS],
]);

/** OR of key-spec flag names ("RW", "access", "not_key", ...; case-insensitive). */
export function parseKeySpecFlags(names: Iterable<string>): number {
  let bits = 0;
  for (const n of names) bits |= KEY_SPEC_FLAG_BY_NAME.get(n.toLowerCase()) ?? 0;
  return bits;
}

/** Names of a key-spec flag mask, in Valkey's spelling (RO/RW/OW/RM upper case, the rest lower). */
export function keySpecFlagNames(bits: number): string[] {
  const out: string[] = [];
  for (const [name, bit] of KEY_SPEC_FLAG_BY_NAME) {
    if (bits & bit) out.push(name.length === 2 ? name.toUpperCase() : name);
  }
  return out;
}
