// respool's own users and permissions, in Valkey's ACL vocabulary (Valkey 8.0.1 acl.c):
// on/off, >password / #sha256 / <password / !sha256 / nopass / resetpass, +@category / -@category,
// +command / -command / +command|subcommand, allcommands / nocommands, ~pattern / %R~ / %W~ /
// allkeys / resetkeys, &pattern / allchannels / resetchannels, reset. Selectors "(…)" are not
// supported. Plus respool's own category @respool-admin: the RESPOOL command (granted only by
// +@respool-admin, never by +@all).
//
// A user's rules are compiled once (config load) into the set of allowed command names, compiled
// key and channel patterns and an `unrestricted` flag, so the dispatch path pays one branch for a
// user with +@all ~* &* (and nothing else) — see checkCommand() in command-check.ts.

import type { KeyNames } from '../keys/key-names.js';
import { nodeCrypto } from '../util/lazy-builtins.js';
import { CommandTable, type CommandSpec } from '../commands/command-table.js';
import type { UpstreamIdentity } from './upstream-identity.js';

/** Valkey's categories in ACL CAT order, then respool's own. */
export const VALKEY_CATEGORIES: readonly string[] = [
  'keyspace', 'read', 'write', 'set', 'sortedset', 'list', 'hash', 'string', 'bitmap', 'hyperloglog', 'geo',
  'stream', 'pubsub', 'admin', 'fast', 'slow', 'blocking', 'dangerous', 'connection', 'transaction', 'scripting',
];
export const RESPOOL_ADMIN_CATEGORY = 'respool-admin';
export const ACL_CATEGORIES: readonly string[] = [...VALKEY_CATEGORIES, RESPOOL_ADMIN_CATEGORY];

/** A key pattern's flags: %R~ (read), %W~ (write), ~ (both). */
export const KEY_READ = 1;
export const KEY_WRITE = 2;
const READ = KEY_READ;
const WRITE = KEY_WRITE;

export interface KeyPattern {
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
  /**
   * Who the user's commands run as on the nodes (src/acl/upstream-identity.ts): null = respool's
   * own upstreamAuth (full-access users, and restricted users without an identity, whose
   * unverifiable commands are then refused). Set by the user directory, not by the rules.
   */
  upstream: UpstreamIdentity | null;
  /**
   * The names its requests and replies use against the nodes' (src/keys/key-names.ts): its
   * namespace (users[].keyPrefix) and the colocation rules; null when neither applies (nothing
   * rewritten). Set by the user directory, not by the rules.
   */
  keyNames: KeyNames | null;
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

/** SHA-256 hex: how passwords are kept here, and the `#<hash>` a rule gives ACL SETUSER (the mirror sends no plaintext). */
export function hashPassword(password: string | Buffer): string {
  return nodeCrypto().createHash('sha256').update(password).digest('hex');
}

/** A user as ACL SETUSER creates it: off, sanitize-payload, no passwords, no keys, no channels, -@all. */
export function newUser(name: string): AclUser {
  return {
    name, enabled: false, nopass: false, skipSanitize: false, passwords: [],
    allCommands: false, future: false, allowed: new Set(), firstArgs: new Map(), commandRules: [],
    allKeys: false, keyPatterns: [], allChannels: false, channels: [], respoolAdmin: false, unrestricted: false,
    upstream: null, keyNames: null,
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
  applyRules(u, rules, table);
  return u;
}

/** Applies rules to an existing user (ACL SETUSER on a user that exists), then recomputes `unrestricted`. */
export function applyRules(u: AclUser, rules: readonly string[], table: CommandTable): void {
  for (const rule of rules) applyRule(u, rule, table);
  u.unrestricted = u.allCommands && u.allKeys && u.allChannels;
}

/** A deep copy of a user (ACL SETUSER stages its changes on one: all rules apply, or none). */
export function cloneUser(u: AclUser): AclUser {
  return {
    ...u,
    passwords: [...u.passwords],
    allowed: new Set(u.allowed),
    firstArgs: new Map([...u.firstArgs].map(([k, v]) => [k, [...v]])),
    commandRules: [...u.commandRules],
    keyPatterns: u.keyPatterns.map((p) => ({ ...p })),
    channels: [...u.channels],
  };
}

/**
 * Copies `from`'s permissions into `into`, keeping `into`'s identity as an object: sessions hold
 * their user, so a change made with ACL SETUSER / LOAD applies to connections already
 * authenticated as it, as Valkey's ACLCopyUser does. `upstream` is the directory's, not copied.
 */
export function copyUserInto(into: AclUser, from: AclUser): void {
  const { upstream, keyNames } = into;
  Object.assign(into, cloneUser(from), { name: into.name, upstream, keyNames });
}

/** The key patterns as ACL GETUSER's `keys` and ACL LIST show them ("~*", "~a:* %R~r:*", "" for none). */
export function describeKeys(u: AclUser): string {
  if (u.allKeys) return '~*';
  return u.keyPatterns.map((p) => keyFlags(p.flags) + p.pattern.toString()).join(' ');
}

/** A key pattern's rule word before its glob: `~` (read and write), `%R~`, `%W~`. */
export function keyFlags(flags: number): string {
  return flags === (READ | WRITE) ? '~' : flags === READ ? '%R~' : '%W~';
}

/** The channels as ACL GETUSER's `channels` shows them ("&*", "&a &b", "" for none). */
export function describeChannels(u: AclUser): string {
  if (u.allChannels) return '&*';
  return u.channels.map((c) => `&${c.toString()}`).join(' ');
}

/** The command rules (Valkey's ACLDescribeSelectorCommandRules): "+@all -flushall", "-@all +@read". */
export function describeCommands(u: AclUser): string {
  return [u.future ? '+@all' : '-@all', ...u.commandRules].join(' ');
}

/** ACL LIST's line for a user (ACLDescribeUser), without the leading "user <name> ". */
export function describeUser(u: AclUser): string {
  const parts: string[] = [u.enabled ? 'on' : 'off'];
  if (u.nopass) parts.push('nopass');
  parts.push(u.skipSanitize ? 'skip-sanitize-payload' : 'sanitize-payload');
  for (const p of u.passwords) parts.push(`#${p}`);
  const keys = describeKeys(u);
  if (keys !== '') parts.push(keys);
  if (u.allChannels) parts.push('&*');
  else {
    parts.push('resetchannels');
    const channels = describeChannels(u);
    if (channels !== '') parts.push(channels);
  }
  parts.push(describeCommands(u));
  return parts.join(' ');
}

/** Valkey's ACLCheckUserCredentials: the user exists, is on, and nopass or a password matches. */
export function checkCredentials(u: AclUser | undefined, password: string | Buffer): boolean {
  if (u === undefined || !u.enabled) return false;
  if (u.nopass) return true;
  const hashed = Buffer.from(hashPassword(password));
  let ok = false;
  for (const p of u.passwords) if (nodeCrypto().timingSafeEqual(hashed, Buffer.from(p))) ok = true;
  return ok;
}
