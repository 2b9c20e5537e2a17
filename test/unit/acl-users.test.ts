import { describe, expect, it } from 'vitest';
import { CommandTable } from '../../src/commands/command-table.js';
import { AclRuleError, compileUser, describeUser, splitRules } from '../../src/acl/rules.js';
import { checkCommand } from '../../src/acl/command-check.js';
import { UserDirectory, type DirectoryConfig } from '../../src/acl/user-directory.js';

const directory = (users: DirectoryConfig['users']) =>
  new UserDirectory({ users, acl: { file: null, upstream: 'none', mirrorPrefix: 'respool.', mirrorSecret: null, logMaxLen: 128 }, upstreamAuth: null }, () => table, () => []);

const table = CommandTable.builtin();
const check = (rules: string, ...args: string[]) => {
  const u = compileUser('u', splitRules(rules), table);
  const a = args.map((x) => Buffer.from(x));
  return checkCommand(u, table.lookup(a)!, a, table);
};

describe('ACL rules (src/acl/users.ts)', () => {
  it("describes users in ACL LIST's format", () => {
    expect(describeUser(compileUser('x', ['reset'], table))).toBe('off sanitize-payload resetchannels -@all');
    expect(describeUser(compileUser('x', splitRules('on nopass ~* &* +@all'), table))).toBe('on nopass sanitize-payload ~* &* +@all');
    expect(describeUser(compileUser('x', splitRules('on ~a:* %R~r:* %W~w:* %RW~rw:* &c +@read -get +get +config|get -config'), table)))
      .toBe('on sanitize-payload ~a:* %R~r:* %W~w:* ~rw:* resetchannels &c -@all +@read +get -config');
  });

  it("refuses bad rules with Valkey's messages", () => {
    const err = (rules: string) => {
      try {
        compileUser('x', splitRules(rules), table);
        return null;
      } catch (e) {
        return (e as AclRuleError).message;
      }
    };
    expect(err('+@nope')).toBe('Unknown command or category name in ACL');
    expect(err('+nope')).toBe('Unknown command or category name in ACL');
    expect(err('bogus')).toBe('Syntax error');
    expect(err('%X~a')).toBe('Syntax error');
    expect(err('+config|get|x')).toBe('Allowing first-arg of a subcommand is not supported');
    expect(err('allchannels &x')).toMatch(/^Adding a pattern after the \* pattern \(or the 'allchannels' flag\)/);
    expect(err('(+get ~x)')).toMatch(/selectors/);
  });

  it('checks commands, keys (read/write from key specs) and channels', () => {
    expect(check('+@read ~*', 'get', 'k')).toBeNull();
    expect(check('+@read ~*', 'set', 'k', 'v')).toEqual({ kind: 1, index: 0 });
    expect(check('+@all %R~r:*', 'get', 'r:1')).toBeNull();
    expect(check('+@all %R~r:*', 'set', 'r:1', 'v')).toEqual({ kind: 2, index: 1 });
    expect(check('+@all %W~w:*', 'set', 'w:1', 'v')).toBeNull(); // OW UPDATE: a write
    expect(check('+@all %W~w:*', 'set', 'w:1', 'v', 'GET')).toEqual({ kind: 2, index: 1 }); // RW ACCESS UPDATE
    expect(check('+@all %W~w:*', 'exists', 'w:1')).toBeNull(); // RO without ACCESS: any pattern
    expect(check('+@all ~a:*', 'mget', 'a:1', 'b:1')).toEqual({ kind: 2, index: 2 });
    expect(check('+@all &chat:*', 'publish', 'chat:1', 'x')).toBeNull();
    expect(check('+@all &chat:*', 'publish', 'news', 'x')).toEqual({ kind: 3, index: 1 });
    expect(check('+@all &chat:*', 'psubscribe', 'chat:*')).toBeNull();
    expect(check('+@all &chat:*', 'psubscribe', 'chat:1*')).toEqual({ kind: 3, index: 1 });
    expect(check('-@all +select|0', 'select', '0')).toBeNull();
    expect(check('-@all +select|0', 'select', '1')).toEqual({ kind: 1, index: 0 });
    expect(check('-@all +config|get', 'config', 'get', 'x')).toBeNull();
    expect(check('-@all +config|get', 'config', 'set', 'x', 'y')).toEqual({ kind: 1, index: 0 });
    expect(check('-@all', 'auth', 'x')).toBeNull(); // no_auth commands
  });

  it('the default user: open without users, off when users exist without it', () => {
    const none = directory([]);
    expect(none.defaultUser.respoolAdmin).toBe(true); // open: the default user may run RESPOOL
    expect(none.defaultUser.unrestricted).toBe(true);
    expect(none.authRequired()).toBe(false);
    const some = directory([{ name: 'a', password: 'x' }]);
    expect(describeUser(some.defaultUser)).toBe('off sanitize-payload resetchannels -@all');
    expect(some.authRequired()).toBe(true);
    expect(some.get('a')!.unrestricted).toBe(true);
    expect(some.get('a')!.respoolAdmin).toBe(false);
    expect(directory([{ name: 'o', rules: 'on nopass +@all ~* &* +@respool-admin' }]).get('o')!.respoolAdmin).toBe(true);
  });
});
