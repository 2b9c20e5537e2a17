// respool's own users and permissions, in Valkey's ACL vocabulary (Valkey 8.0.1 acl.c):
// on/off, >password / #sha256 / <password / !sha256 / nopass / resetpass, +@category / -@category,
// +command / -command / +command|subcommand, allcommands / nocommands, ~pattern / %R~ / %W~ /
// allkeys / resetkeys, &pattern / allchannels / resetchannels, reset. Selectors "(…)" are not
// supported. Plus respool's own category @respool-admin: the RESPOOL command (granted only by
// +@respool-admin, never by +@all).
//
// A user's rules are compiled once (config load) into the set of allowed command names, compiled
// key and channel patterns and an `unrestricted` flag, so the dispatch path pays one branch for a
// user with +@all ~* &* (and nothing else) — see checkCommand().

import { createHash, timingSafeEqual } from 'node:crypto';
import { CommandTable, commandMayHaveKeys, type CommandSpec } from '../commands/command-table.js';
import { CommandFlag, KeySpecFlag } from '../commands/command-flags.js';
import { NATIVE_GETKEYS, type KeyRef } from '../commands/key-specs.js';
import { globMatch } from '../util/glob.js';

/** Valkey's categories in ACL CAT order, then respool's own. */
export const VALKEY_CATEGORIES: readonly string[] = [
  'keyspace', 'read', 'write', 'set', 'sortedset', 'list', 'hash', 'string', 'bitmap', 'hyperloglog', 'geo',
  'stream', 'pubsub', 'admin', 'fast', 'slow', 'blocking', 'dangerous', 'connection', 'transaction', 'scripting',
];
export const RESPOOL_ADMIN_CATEGORY = 'respool-admin';
export const ACL_CATEGORIES: readonly string[] = [...VALKEY_CATEGORIES, RESPOOL_ADMIN_CATEGORY];

const READ = 1;
const WRITE = 2;

interface KeyPattern {
  pattern: Buffer;
  flags: number; // READ | WRITE
  /** "app:*" (no other glob characters): the prefix, compared without running the glob. */
  prefix: Buffer | null;
}

/** The literal prefix of a pattern that is `literal*` (no ?, [, \\ or other *), else null. */
function literalPrefix(pattern: Buffer): Buffer | null {
  const n = pattern.length;
  if (n === 0 || pattern[n - 1] !== 0x2a) return null;
  for (let i = 0; i < n - 1; i++) {
    const c = pattern[i]!;
    if (c === 0x2a || c === 0x3f || c === 0x5b || c === 0x5c) return null;
  }
  return pattern.subarray(0, n - 1);
}

/** One user, compiled. */
export interface AclUser {
  readonly name: string;
  enabled: boolean;
  nopass: boolean;
  skipSanitize: boolean;
  /** SHA-256 hex of each password, in the order given. */
  passwords: string[];
  /** SELECTOR_FLAG_ALLCOMMANDS: every command, no bit test. */
  allCommands: boolean;
  /** The reserved "future commands" bit (+@all): commands unknown to respool's table are let through. */
  future: boolean;
  /** Allowed command full names ("get", "config|get"), when not allCommands. */
  allowed: Set<string>;
  /** Allowed first arguments of an otherwise denied command ("select" → ["0"]), lower case. */
  firstArgs: Map<string, string[]>;
  /** The ordered command rules, as Valkey keeps them for ACL LIST ("+@read", "-flushall"). */
  commandRules: string[];
  allKeys: boolean;
  keyPatterns: KeyPattern[];
  allChannels: boolean;
  channels: Buffer[];
  /** +@respool-admin: may run RESPOOL …. */
  respoolAdmin: boolean;
  /** +@all ~* &* (allcommands, allkeys, allchannels): nothing to check per command. */
  unrestricted: boolean;
}

/** A rule Valkey would refuse: the message is ACLSetUserStringError's. */
export class AclRuleError extends Error {
  constructor(readonly rule: string, message: string) {
    super(message);
  }
}

const ERR_ENOENT = 'Unknown command or category name in ACL';
const ERR_EINVAL = 'Syntax error';
const ERR_EEXIST = "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns";
const ERR_EISDIR = "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have any effect. Try 'resetchannels' to start with an empty list of channels";
const ERR_ENODEV = 'The password you are trying to remove from the user does not exist';
const ERR_EBADMSG = 'The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters';
const ERR_ECHILD = 'Allowing first-arg of a subcommand is not supported';

export function hashPassword(password: string | Buffer): string {
  return createHash('sha256').update(password).digest('hex');
}

/** A user as ACL SETUSER creates it: off, sanitize-payload, no passwords, no keys, no channels, -@all. */
export function newUser(name: string): AclUser {
  return {
    name, enabled: false, nopass: false, skipSanitize: false, passwords: [],
    allCommands: false, future: false, allowed: new Set(), firstArgs: new Map(), commandRules: [],
    allKeys: false, keyPatterns: [], allChannels: false, channels: [], respoolAdmin: false, unrestricted: false,
  };
}

/** Valkey's sdssplitargs, enough for rule lines: spaces separate, "…" (with \ escapes) and '…' quote. */
export function splitRules(line: string): string[] {
  const out: string[] = [];
  let i = 0;
  while (i < line.length) {
    while (i < line.length && /\s/.test(line[i]!)) i++;
    if (i >= line.length) break;
    let cur = '';
    let quote: '"' | "'" | null = null;
    for (; i < line.length; i++) {
      const c = line[i]!;
      if (quote === '"') {
        if (c === '\\' && i + 1 < line.length) cur += line[++i];
        else if (c === '"') quote = null;
        else cur += c;
      } else if (quote === "'") {
        if (c === "'") quote = null;
        else cur += c;
      } else if (c === '"' || c === "'") {
        quote = c;
      } else if (/\s/.test(c)) {
        break;
      } else {
        cur += c;
      }
    }
    if (quote !== null) throw new AclRuleError(line, 'unbalanced quotes in the rules');
    out.push(cur);
  }
  return out;
}

function hasSpaces(s: string): boolean {
  return /[\s\0]/.test(s);
}

/** Every command and subcommand of the table, top level first as Valkey's dict walk (order irrelevant for bits). */
function allSpecs(table: CommandTable): CommandSpec[] {
  const out: CommandSpec[] = [];
  for (const spec of table.commands()) {
    out.push(spec);
    if (spec.subcommands) for (const sub of spec.subcommands.values()) out.push(sub);
  }
  return out;
}

function setBit(u: AclUser, name: string, allow: boolean): void {
  if (allow) u.allowed.add(name);
  else {
    u.allowed.delete(name);
    u.allCommands = false;
  }
}

/** ACLChangeSelectorPerm: the command, and every subcommand of a container. */
function changePerm(u: AclUser, spec: CommandSpec, allow: boolean): void {
  setBit(u, spec.name, allow);
  u.firstArgs.delete(spec.name);
  if (spec.subcommands) for (const sub of spec.subcommands.values()) setBit(u, sub.name, allow);
}

/** ACLUpdateCommandRules: drop the same rule (and a whole command's subcommand rules), append. */
function updateCommandRules(u: AclUser, rule: string, allow: boolean): void {
  const r = rule.toLowerCase();
  u.commandRules = u.commandRules.filter((existing) => {
    const e = existing.slice(1);
    return !(e === r || (e.startsWith(r) && e[r.length] === '|'));
  });
  u.commandRules.push(`${allow ? '+' : '-'}${r}`);
}

function lookupCommand(table: CommandTable, name: string): CommandSpec | undefined {
  return table.get(name.toLowerCase());
}

/** ACLSetUser + ACLSetSelector for one rule. Throws AclRuleError with Valkey's message. */
export function applyRule(u: AclUser, op: string, table: CommandTable): void {
  const fail = (message: string): never => {
    throw new AclRuleError(op, message);
  };
  const lower = op.toLowerCase();
  if (op.length === 0) return;
  if (lower === 'on') u.enabled = true;
  else if (lower === 'off') u.enabled = false;
  else if (lower === 'skip-sanitize-payload') u.skipSanitize = true;
  else if (lower === 'sanitize-payload') u.skipSanitize = false;
  else if (lower === 'nopass') {
    u.nopass = true;
    u.passwords = [];
  } else if (lower === 'resetpass') {
    u.nopass = false;
    u.passwords = [];
  } else if (op[0] === '>' || op[0] === '#') {
    let hash: string;
    if (op[0] === '>') hash = hashPassword(op.slice(1));
    else {
      hash = op.slice(1);
      if (!/^[0-9a-f]{64}$/.test(hash)) fail(ERR_EBADMSG);
    }
    if (!u.passwords.includes(hash)) u.passwords.push(hash);
    u.nopass = false;
  } else if (op[0] === '<' || op[0] === '!') {
    let hash: string;
    if (op[0] === '<') hash = hashPassword(op.slice(1));
    else {
      hash = op.slice(1);
      if (!/^[0-9a-f]{64}$/.test(hash)) fail(ERR_EBADMSG);
    }
    const at = u.passwords.indexOf(hash);
    if (at < 0) fail(ERR_ENODEV);
    u.passwords.splice(at, 1);
  } else if (op[0] === '(' || op[op.length - 1] === ')') {
    fail('selectors "(…)" are not supported by respool');
  } else if (lower === 'clearselectors') {
    // no selectors besides the root one
  } else if (lower === 'reset') {
    u.nopass = false;
    u.passwords = [];
    u.allKeys = false;
    u.keyPatterns = [];
    u.allChannels = false;
    u.channels = [];
    u.enabled = false;
    u.skipSanitize = false;
    applyRule(u, '-@all', table);
  } else {
    applySelectorRule(u, op, table, fail);
  }
}

function applySelectorRule(u: AclUser, op: string, table: CommandTable, fail: (m: string) => never): void {
  const lower = op.toLowerCase();
  if (lower === 'allkeys' || lower === '~*') {
    u.allKeys = true;
    u.keyPatterns = [];
  } else if (lower === 'resetkeys') {
    u.allKeys = false;
    u.keyPatterns = [];
  } else if (lower === 'allchannels' || lower === '&*') {
    u.allChannels = true;
    u.channels = [];
  } else if (lower === 'resetchannels') {
    u.allChannels = false;
    u.channels = [];
  } else if (lower === 'allcommands' || lower === '+@all') {
    for (const spec of allSpecs(table)) u.allowed.add(spec.name);
    u.allCommands = true;
    u.future = true;
    u.commandRules = [];
    u.firstArgs.clear();
  } else if (lower === 'nocommands' || lower === '-@all') {
    u.allowed.clear();
    u.allCommands = false;
    u.future = false;
    u.commandRules = [];
    u.firstArgs.clear();
    u.respoolAdmin = false;
  } else if (op[0] === '~' || op[0] === '%') {
    if (u.allKeys) fail(ERR_EEXIST);
    let flags = 0;
    let offset = 1;
    if (op[0] === '%') {
      let ok = false;
      for (; offset < op.length; offset++) {
        const c = op[offset]!.toUpperCase();
        if (c === 'R' && !(flags & READ)) flags |= READ;
        else if (c === 'W' && !(flags & WRITE)) flags |= WRITE;
        else if (op[offset] === '~' && flags) {
          offset++;
          ok = true;
          break;
        } else fail(ERR_EINVAL);
      }
      if (!ok) fail(ERR_EINVAL);
    } else {
      flags = READ | WRITE;
    }
    const text = op.slice(offset);
    if (hasSpaces(text)) fail(ERR_EINVAL);
    const pattern = Buffer.from(text);
    const same = u.keyPatterns.find((p) => p.pattern.equals(pattern));
    if (same) same.flags |= flags;
    else u.keyPatterns.push({ pattern, flags, prefix: literalPrefix(pattern) });
    u.allKeys = false;
  } else if (op[0] === '&') {
    if (u.allChannels) fail(ERR_EISDIR);
    const text = op.slice(1);
    if (hasSpaces(text)) fail(ERR_EINVAL);
    const pattern = Buffer.from(text);
    if (!u.channels.some((c) => c.equals(pattern))) u.channels.push(pattern);
    u.allChannels = false;
  } else if (op[0] === '+' && op[1] !== '@') {
    const bar = op.lastIndexOf('|');
    if (bar < 0) {
      const spec = lookupCommand(table, op.slice(1)) ?? fail(ERR_ENOENT);
      changePerm(u, spec, true);
      updateCommandRules(u, spec.name, true);
    } else {
      const parentName = op.slice(1, bar);
      const sub = op.slice(bar + 1);
      const parent = lookupCommand(table, parentName) ?? fail(ERR_ENOENT);
      if (parent.parent !== undefined) fail(ERR_ECHILD);
      if (sub.length === 0) fail(ERR_EINVAL);
      if (parent.subcommands) {
        const spec = lookupCommand(table, op.slice(1)) ?? fail(ERR_ENOENT);
        changePerm(u, spec, true);
      } else {
        const list = u.firstArgs.get(parent.name) ?? [];
        if (!list.includes(sub.toLowerCase())) list.push(sub.toLowerCase());
        u.firstArgs.set(parent.name, list);
      }
      updateCommandRules(u, op.slice(1), true);
    }
  } else if (op[0] === '-' && op[1] !== '@') {
    const spec = lookupCommand(table, op.slice(1)) ?? fail(ERR_ENOENT);
    changePerm(u, spec, false);
    updateCommandRules(u, spec.name, false);
  } else if ((op[0] === '+' || op[0] === '-') && op[1] === '@') {
    const allow = op[0] === '+';
    const category = lower.slice(2);
    if (category === RESPOOL_ADMIN_CATEGORY) {
      u.respoolAdmin = allow;
      updateCommandRules(u, op.slice(1), allow);
      return;
    }
    if (!VALKEY_CATEGORIES.includes(category)) fail(ERR_ENOENT);
    updateCommandRules(u, op.slice(1), allow);
    const tag = `@${category}`;
    for (const spec of table.commands()) {
      if (spec.aclCategories?.includes(tag)) changePerm(u, spec, allow);
      if (spec.subcommands) {
        for (const sub of spec.subcommands.values()) if (sub.aclCategories?.includes(tag)) changePerm(u, sub, allow);
      }
    }
  } else {
    fail(ERR_EINVAL);
  }
}

/** Compiles a user from its rules (applied to a new user, as ACL SETUSER name <rules> would). */
export function compileUser(name: string, rules: readonly string[], table: CommandTable = CommandTable.builtin()): AclUser {
  const u = newUser(name);
  for (const rule of rules) applyRule(u, rule, table);
  u.unrestricted = u.allCommands && u.allKeys && u.allChannels;
  return u;
}

/** ACL LIST's line for a user (ACLDescribeUser), without the leading "user <name> ". */
export function describeUser(u: AclUser): string {
  const parts: string[] = [u.enabled ? 'on' : 'off'];
  if (u.nopass) parts.push('nopass');
  parts.push(u.skipSanitize ? 'skip-sanitize-payload' : 'sanitize-payload');
  for (const p of u.passwords) parts.push(`#${p}`);
  if (u.allKeys) parts.push('~*');
  else {
    for (const p of u.keyPatterns) {
      const prefix = p.flags === (READ | WRITE) ? '~' : p.flags === READ ? '%R~' : '%W~';
      parts.push(prefix + p.pattern.toString());
    }
  }
  if (u.allChannels) parts.push('&*');
  else {
    parts.push('resetchannels');
    for (const c of u.channels) parts.push(`&${c.toString()}`);
  }
  parts.push(u.future ? '+@all' : '-@all');
  parts.push(...u.commandRules);
  return parts.join(' ');
}

/** Valkey's ACLCheckUserCredentials: the user exists, is on, and nopass or a password matches. */
export function checkCredentials(u: AclUser | undefined, password: string | Buffer): boolean {
  if (u === undefined || !u.enabled) return false;
  if (u.nopass) return true;
  const hashed = Buffer.from(hashPassword(password));
  let ok = false;
  for (const p of u.passwords) if (timingSafeEqual(hashed, Buffer.from(p))) ok = true;
  return ok;
}

// ---------------------------------------------------------------------------------------------
// The per-command check (ACLSelectorCheckCmd, one root selector).

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

function channelAllowed(u: AclUser, channel: Buffer, isPattern: boolean): boolean {
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

/** Whether the arity is wrong (Valkey checks it, with its own error, before the ACL). */
export function wrongArity(spec: CommandSpec, argc: number): boolean {
  return (spec.arity > 0 && spec.arity !== argc) || argc < -spec.arity;
}

// ---------------------------------------------------------------------------------------------
// The users of a configuration.

export interface UserConfig {
  name: string;
  password?: string;
  rules?: string;
}

export interface AclUsers {
  /** By name; always holds "default". */
  readonly byName: ReadonlyMap<string, AclUser>;
  readonly defaultUser: AclUser;
  /** No users configured: respool behaves as Valkey's default user without a password; RESPOOL open to all. */
  readonly open: boolean;
}

/** The rule words of one configured user: {name, password} alone is `on >password +@all ~* &*`. */
export function rulesOf(user: UserConfig): string[] {
  if (user.rules === undefined) return ['on', `>${user.password ?? ''}`, '+@all', '~*', '&*'];
  const words = splitRules(user.rules);
  if (user.password !== undefined) words.push(`>${user.password}`);
  return words;
}

export function buildUsers(users: readonly UserConfig[], table: CommandTable = CommandTable.builtin()): AclUsers {
  const byName = new Map<string, AclUser>();
  for (const user of users) byName.set(user.name, compileUser(user.name, rulesOf(user), table));
  const open = users.length === 0;
  if (!byName.has('default')) {
    // No users: Valkey's default user (on nopass ~* &* +@all). Users but no default: `reset` (off).
    byName.set('default', compileUser('default', open ? ['+@all', '~*', '&*', 'on', 'nopass'] : ['reset'], table));
  }
  return { byName, defaultUser: byName.get('default')!, open };
}

/** Null when a configured user's rules compile; else the problem, naming the field and the rule (config validation). */
export function aclRulesProblem(user: UserConfig): string | null {
  try {
    compileUser(user.name, rulesOf(user));
    return null;
  } catch (e) {
    if (!(e instanceof AclRuleError)) throw e;
    const field = user.rules === undefined ? 'password' : 'rules';
    return `${field}: ${JSON.stringify(e.rule)}: ${e.message}`;
  }
}

const cache = new WeakMap<object, AclUsers>();

/** The compiled users of a configuration's `users` list (compiled once per list). */
export function usersOf(config: { users: readonly UserConfig[] }): AclUsers {
  let acl = cache.get(config.users);
  if (acl === undefined) {
    acl = buildUsers(config.users);
    cache.set(config.users, acl);
  }
  return acl;
}

/** Valkey's authRequired(): the default user has a password or is off. */
export function defaultNeedsAuth(acl: AclUsers): boolean {
  return !acl.defaultUser.nopass || !acl.defaultUser.enabled;
}
