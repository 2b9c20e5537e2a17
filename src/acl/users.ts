// The users a configuration defines (users: in the config file): their rule words and upstream
// identity settings. The running set of users — these, the ACL file's and those made with ACL
// SETUSER — is the user directory's (user-directory.ts).

import { CommandTable } from '../commands/command-table.js';
import { AclRuleError, compileUser, splitRules } from './rules.js';
import type { UpstreamSetting } from './upstream-identity.js';

export interface UserConfig {
  name: string;
  password?: string;
  rules?: string;
  /** Who its commands run as on the nodes (upstream-identity.ts); absent: acl.upstream decides. */
  upstream?: UpstreamSetting;
  /**
   * Its namespace (docs/key-names.md): added to every key and channel name of its requests,
   * taken off every name in its replies; absent: it sees the keyspace as it is.
   */
  keyPrefix?: string;
  /** Its tenant (config tenants[].name), whose keyPrefix it takes; absent: the default tenant. */
  tenant?: string;
}

/** The rule words of one configured user: {name, password} alone is `on >password +@all ~* &*`. */
export function rulesOf(user: UserConfig): string[] {
  if (user.rules === undefined) return ['on', `>${user.password ?? ''}`, '+@all', '~*', '&*'];
  const words = splitRules(user.rules);
  if (user.password !== undefined) words.push(`>${user.password}`);
  return words;
}

/** A rule word that holds a password or its hash: never printed. */
export function isSecretRule(rule: string): boolean {
  const c = rule[0];
  return c === '>' || c === '<' || c === '#' || c === '!';
}

/** A rules string with every password and hash rule replaced by `>(redacted)` (for /config and logs). */
export function redactRules(rules: string): string {
  let words: string[];
  try {
    words = splitRules(rules);
  } catch {
    return '(redacted)';
  }
  return words.map((w) => (isSecretRule(w) ? `${w[0]}(redacted)` : w)).join(' ');
}

/** Null when a configured user's rules compile; else the problem, naming the field and the rule (config validation). */
export function aclRulesProblem(user: UserConfig, table: CommandTable = CommandTable.builtin()): string | null {
  try {
    compileUser(user.name, rulesOf(user), table);
    return null;
  } catch (e) {
    if (!(e instanceof AclRuleError)) throw e;
    const field = user.rules === undefined ? 'password' : 'rules';
    const rule = isSecretRule(e.rule) ? `${e.rule[0]}<redacted>` : e.rule;
    return `${field}: ${JSON.stringify(rule)}: ${e.message}`;
  }
}
