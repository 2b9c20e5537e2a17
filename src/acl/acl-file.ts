// Valkey's aclfile format (acl.c ACLLoadFromFile / ACLSaveToFile): one `user <name> <rules…>`
// line per user, split on single spaces; blank lines skipped. ACL LOAD reads it whole or not at
// all (any error keeps the users as they were), ACL SAVE writes it through a temporary file and a
// rename, so a reader never sees half a file.

import { closeSync, fsyncSync, openSync, readFileSync, renameSync, writeSync } from 'node:fs';
import type { CommandTable } from '../commands/command-table.js';
import { AclRuleError, compileUser, describeUser, type AclUser } from './rules.js';

export interface AclFileUser {
  name: string;
  /** The rule words of its line, as written. */
  rules: string[];
  user: AclUser;
}

/**
 * The users of an aclfile, compiled; or the errors, in Valkey's wording, one sentence per problem
 * (the whole text is what ACL LOAD answers). `reserved` names users that may not appear in it
 * (respool's configured users: they come from the config file).
 */
export function readAclFile(file: string, table: CommandTable, reserved: ReadonlySet<string>): { users: AclFileUser[] } | { error: string } {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    const why = code === 'ENOENT' ? 'No such file or directory' : code === 'EACCES' ? 'Permission denied' : (e as Error).message;
    return { error: `Error loading ACLs, opening file '${file}': ${why}` };
  }
  let errors = '';
  const users: AclFileUser[] = [];
  const seen = new Set<string>();
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!.replace(/^[ \t\r\n]+|[ \t\r\n]+$/g, '');
    const linenum = i + 1;
    if (line === '') continue;
    const argv = line.split(' ').filter((w) => w !== '');
    if (argv.length === 0) continue;
    if (argv[0] !== 'user' || argv.length < 2) {
      errors += `${file}:${linenum} should start with user keyword followed by the username. `;
      continue;
    }
    const name = argv[1]!;
    if (/[\s\0]/.test(name)) {
      errors += `'${file}:${linenum}: username '${name}' contains invalid characters. `;
      continue;
    }
    if (seen.has(name)) {
      errors += `WARNING: Duplicate user '${name}' found on line ${linenum}. `;
      continue;
    }
    seen.add(name);
    if (reserved.has(name)) {
      errors += `${file}:${linenum}: user '${name}' is defined in respool's configuration (users:), which the ACL file cannot redefine. `;
      continue;
    }
    const rules = argv.slice(2).map((w) => w.replace(/^[\t\r\n]+|[\t\r\n]+$/g, ''));
    try {
      users.push({ name, rules, user: compileUser(name, rules, table) });
    } catch (e) {
      if (!(e instanceof AclRuleError)) throw e;
      // Valkey names the operation only when the command or category is unknown: other rules may hold a password.
      errors += e.message === 'Unknown command or category name in ACL'
        ? `${file}:${linenum}: Error in applying operation '${e.rule}': ${e.message}. `
        : `${file}:${linenum}: ${e.message}. `;
    }
  }
  if (errors !== '') return { error: `${errors}WARNING: ACL errors detected, no change to the previously active ACL rules was performed` };
  return { users };
}

/** The file ACL SAVE writes: `user <name> <ACL LIST description>` per user, in the order given. */
export function aclFileText(users: readonly AclUser[]): string {
  return users.map((u) => `user ${u.name} ${describeUser(u)}\n`).join('');
}

/** Writes `text` to `file` atomically (temporary file, fsync, rename); throws on failure. */
export function writeAclFile(file: string, text: string): void {
  const tmp = `${file}.tmp-${process.pid}-${Date.now()}`;
  const fd = openSync(tmp, 'w', 0o600); // it holds password hashes: owner only
  try {
    writeSync(fd, text);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, file);
}
