// The per-command check (Valkey's ACLSelectorCheckCmd, one root selector): command bits, key
// patterns with read/write flags from the key specs, channels. Compiled users come from rules.ts.

import type { CommandSpec } from '../commands/command-table.js';
import { CommandFlag, KeySpecFlag } from '../commands/command-flags.js';
import { NATIVE_GETKEYS, type KeyRef } from '../commands/key-specs.js';
import { commandMayHaveKeys } from '../commands/command-table.js';
import { globMatch } from '../util/glob.js';
import { KEY_READ as READ, KEY_WRITE as WRITE, type AclUser } from './rules.js';

export const ACL_DENIED_CMD = 1;
export const ACL_DENIED_KEY = 2;
export const ACL_DENIED_CHANNEL = 3;

export interface AclDenial {
  kind: typeof ACL_DENIED_CMD | typeof ACL_DENIED_KEY | typeof ACL_DENIED_CHANNEL;
  /** The argument that failed (0 for the command itself). */
  index: number;
}

/** Valkey's commands_with_channels (db.c): channel argument range and whether it is a pattern. */
const CHANNEL_COMMANDS: ReadonlyMap<string, { first: number; last: number; pattern: boolean }> = new Map([
  ['subscribe', { first: 1, last: -1, pattern: false }],
  ['ssubscribe', { first: 1, last: -1, pattern: false }],
  ['psubscribe', { first: 1, last: -1, pattern: true }],
  ['publish', { first: 1, last: 1, pattern: false }],
  ['spublish', { first: 1, last: 1, pattern: false }],
]);

/** Valkey's setGetKeys / bitfieldGetKeys flags (VARIABLE_FLAGS commands). */
function variableFlags(name: string, args: readonly Buffer[]): number | null {
  if (name === 'set') {
    for (let i = 3; i < args.length; i++) {
      if (args[i]!.length === 3 && args[i]!.toString('latin1').toLowerCase() === 'get') return KeySpecFlag.RW | KeySpecFlag.ACCESS | KeySpecFlag.UPDATE;
    }
    return KeySpecFlag.OW | KeySpecFlag.UPDATE;
  }
  if (name === 'bitfield') {
    let readonly = true;
    for (let i = 2; i < args.length; i++) {
      const rem = args.length - i - 1;
      const a = args[i]!.toString('latin1').toLowerCase();
      if (a === 'get' && rem >= 2) i += 2;
      else if ((a === 'set' || a === 'incrby') && rem >= 3) {
        readonly = false;
        break;
      } else if (a === 'overflow' && rem >= 1) i += 1;
      else {
        readonly = false;
        break;
      }
    }
    return readonly ? KeySpecFlag.RO | KeySpecFlag.ACCESS : KeySpecFlag.RW | KeySpecFlag.ACCESS | KeySpecFlag.UPDATE;
  }
  return null;
}

function keyAllowed(u: AclUser, key: Buffer, specFlags: number): boolean {
  let need = 0;
  if (specFlags & KeySpecFlag.ACCESS) need |= READ;
  if (specFlags & (KeySpecFlag.INSERT | KeySpecFlag.DELETE | KeySpecFlag.UPDATE)) need |= WRITE;
  for (const p of u.keyPatterns) {
    if ((p.flags & need) !== need) continue;
    const prefix = p.prefix;
    if (prefix !== null ? key.length >= prefix.length && prefix.compare(key, 0, prefix.length) === 0 : globMatch(p.pattern, key)) return true;
  }
  return false;
}

/** Whether `u` may subscribe to `channel` (a pattern must equal one of the user's; a channel matches one of them as a glob). */
export function channelAllowed(u: AclUser, channel: Buffer, isPattern: boolean): boolean {
  if (u.allChannels) return true;
  for (const c of u.channels) {
    if (isPattern ? c.equals(channel) : globMatch(c, channel)) return true;
  }
  return false;
}

/**
 * Null when `u` may run the request, else what was denied. The caller skips it for unrestricted
 * users and checks arity first (Valkey answers a wrong arity before the ACL).
 */
export interface KeyLocator {
  keyRefs(spec: CommandSpec, args: readonly Buffer[]): KeyRef[];
  keyIndexes(spec: CommandSpec, args: readonly Buffer[]): number[];
}

/** Key specs that all carry the same flags (most commands have one): the compiled finder will do. */
const uniformFlags = new WeakMap<CommandSpec, number>();
function sameFlags(spec: CommandSpec): number {
  let f = uniformFlags.get(spec);
  if (f === undefined) {
    f = -1;
    const specs = spec.keySpecs;
    if (specs.length > 0 && specs.every((k) => k.flags === specs[0]!.flags) && !(specs[0]!.flags & (KeySpecFlag.NOT_KEY | KeySpecFlag.INCOMPLETE))) f = specs[0]!.flags;
    uniformFlags.set(spec, f);
  }
  return f;
}

export function checkCommand(u: AclUser, spec: CommandSpec, args: readonly Buffer[], keys: KeyLocator): AclDenial | null {
  if (!u.allCommands && !(spec.flags & CommandFlag.NO_AUTH) && !u.allowed.has(spec.name)) {
    const firsts = u.firstArgs.get(spec.name);
    const idx = spec.parent ? 2 : 1;
    if (firsts === undefined || args.length < 2 || idx >= args.length || !firsts.includes(args[idx]!.toString().toLowerCase())) {
      return { kind: ACL_DENIED_CMD, index: 0 };
    }
  }
  if (!u.allKeys && commandMayHaveKeys(spec)) {
    const varFlags = variableFlags(spec.name, args);
    const uniform = varFlags ?? sameFlags(spec);
    if (uniform >= 0 && !NATIVE_GETKEYS.has(spec.name)) {
      // Fast path: the compiled key finder (no allocation per key), one set of flags.
      const idx = keys.keyIndexes(spec, args);
      for (let i = 0; i < idx.length; i++) {
        if (!keyAllowed(u, args[idx[i]!]!, uniform)) return { kind: ACL_DENIED_KEY, index: idx[i]! };
      }
      return checkChannels(u, spec, args);
    }
    const refs = keys.keyRefs(spec, args);
    for (const ref of refs) {
      if (ref.flags & KeySpecFlag.NOT_KEY) continue;
      const flags = varFlags ?? ref.flags;
      if (!keyAllowed(u, args[ref.index]!, flags)) return { kind: ACL_DENIED_KEY, index: ref.index };
    }
  }
  return checkChannels(u, spec, args);
}

function checkChannels(u: AclUser, spec: CommandSpec, args: readonly Buffer[]): AclDenial | null {
  if (!u.allChannels) {
    const ch = CHANNEL_COMMANDS.get(spec.name);
    if (ch !== undefined) {
      const last = ch.last < 0 ? args.length + ch.last : Math.min(ch.last, args.length - 1);
      for (let i = ch.first; i <= last; i++) {
        if (!channelAllowed(u, args[i]!, ch.pattern)) return { kind: ACL_DENIED_CHANNEL, index: i };
      }
    }
  }
  return null;
}

/** Valkey's getAclErrorMessage (verbose for ACL DRYRUN). */
export function aclErrorMessage(denial: AclDenial, u: AclUser, commandName: string, value: Buffer | undefined, verbose: boolean): string {
  switch (denial.kind) {
    case ACL_DENIED_CMD:
      return `User ${u.name} has no permissions to run the '${commandName}' command`;
    case ACL_DENIED_KEY:
      return verbose ? `User ${u.name} has no permissions to access the '${value?.toString() ?? ''}' key` : 'No permissions to access a key';
    default:
      return verbose ? `User ${u.name} has no permissions to access the '${value?.toString() ?? ''}' channel` : 'No permissions to access a channel';
  }
}

/** The commands whose key and command accesses respool cannot see: they run code on the node. */
const CODE_COMMANDS: ReadonlySet<string> = new Set(['eval', 'evalsha', 'eval_ro', 'evalsha_ro', 'fcall', 'fcall_ro']);

/**
 * True when respool's own check of this request is not complete, so only the node can enforce a
 * restricted user's rules on it: scripts and functions (the keys and commands they touch are not
 * in the request), SORT / SORT_RO with a BY pattern (one with `*`) or GET (they read keys built
 * from the sorted values), and any command whose key specs say they are incomplete. Such a request
 * of a restricted user runs upstream as that user's identity, or is refused without one.
 */
export function needsNodeCheck(spec: CommandSpec, args: readonly Buffer[]): boolean {
  const name = spec.name;
  if (CODE_COMMANDS.has(name)) return true;
  if (name === 'sort' || name === 'sort_ro') {
    for (let i = 2; i < args.length - 1; i++) {
      const option = args[i]!.toString('latin1').toLowerCase();
      if (option === 'get') return true;
      if (option === 'by') {
        if (args[i + 1]!.includes(0x2a /* * */)) return true;
        i++;
      } else if (option === 'limit') i += 2;
      else if (option === 'store') i++;
    }
    return false;
  }
  for (const ks of spec.keySpecs) if (ks.flags & KeySpecFlag.INCOMPLETE) return true;
  return false;
}
