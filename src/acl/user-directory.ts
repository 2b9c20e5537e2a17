// The running set of respool's users, as Valkey keeps its own: the configuration's users, the ACL
// file's (acl.file) and those made at run time (ACL SETUSER), each a compiled AclUser.
//
//   identity : sessions hold their user object, so a user is changed in place (copyUserInto) and
//              the change applies to connections already authenticated as it, as on Valkey
//   removal  : a user that is deleted (ACL DELUSER), or is gone after ACL LOAD / a reload, has
//              its connections closed; a subscriber whose channels a change revoked is closed too
//   origins  : 'config' users come from users: (a reload re-reads them; ACL SAVE leaves them
//              out, so the two sources never both define a name); 'file' users from acl.file
//              (ACL LOAD and every reload read it whole, or not at all); 'runtime' ones were made
//              with ACL SETUSER and last until ACL SAVE writes them, or, without a file, for the
//              life of the process
//   upstream : each user's identity on the nodes (upstream-identity.ts) is worked out here, from
//              users[].upstream or acl.upstream, whenever the user or the settings change

import type { CommandTable } from '../commands/command-table.js';
import { AclLog, type AclLogReason } from './acl-log.js';
import { aclFileText, readAclFile, writeAclFile } from './acl-file.js';
import { channelAllowed } from './command-check.js';
import { KeyColocation, type ColocationRule } from '../keys/colocation.js';
import { KeyNames } from '../keys/key-names.js';
import { AclRuleError, applyRules, cloneUser, compileUser, copyUserInto, newUser, type AclUser } from './rules.js';
import { mappedIdentity, mirrorIdentity, mirrorSecretOf, type UpstreamIdentity, type UpstreamSetting } from './upstream-identity.js';
import { rulesOf, type UserConfig } from './users.js';

/** What the directory reads from the configuration (the running config object: a reload changes it in place). */
export interface DirectoryConfig {
  users: UserConfig[];
  acl: { file: string | null; upstream: 'none' | 'mirror' | 'auto'; mirrorPrefix: string; mirrorSecret: string | null; logMaxLen: number };
  upstreamAuth: { username: string | null; password: string } | null;
  /** Absent: none. */
  colocate?: ColocationRule[];
  /** Tenants (config tenants[]): a user of one takes its keyPrefix (users[].tenant). Absent: none. */
  tenants?: ReadonlyArray<{ readonly name: string; readonly keyPrefix: string | null }>;
}

/** A connection as the directory sees it (a client session). */
export interface DirectoryClient {
  /** Its CLIENT ID. */
  readonly id: number;
  /** The user it is authenticated as; null before AUTH. */
  readonly user: string | null;
  /** Its subscriptions, if any: a change that revokes one of them closes the connection. */
  subscribedNames(): { channels: Buffer[]; patterns: Buffer[]; shardChannels: Buffer[] } | null;
  /** Closes the connection; `afterReply` for the client that ran the command itself (it gets its reply first). */
  close(afterReply: boolean): void;
}

type Origin = 'config' | 'file' | 'runtime';

/** A user whose identity is mirrored onto the nodes, with its rules (identity-mirror.ts). */
export interface MirroredUser {
  readonly identity: UpstreamIdentity;
  readonly user: AclUser;
}

const NO_FILE =
  "ERR This instance is not configured to use an ACL file. You may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a configuration file set) in order to store users in the configuration.";

export class UserDirectory {
  private readonly users = new Map<string, AclUser>();
  private readonly origins = new Map<string, Origin>();
  /** No users configured and no ACL file: the default user is Valkey's (nopass, everything) and may run RESPOOL. */
  private open = true;
  private readonly listeners: Array<() => void> = [];
  /** Identities by key, so a user keeps one object (and its pools) while its setting stays the same. */
  private readonly identities = new Map<string, UpstreamIdentity>();
  readonly log: AclLog;
  /** The colocation rules (a restart changes them), and the names of every user without a namespace. */
  private readonly colocation: KeyColocation | null;
  private readonly sharedNames: KeyNames | null;

  constructor(
    private readonly config: DirectoryConfig,
    private readonly table: () => CommandTable,
    private readonly clients: () => Iterable<DirectoryClient>,
    onDenial?: (username: string, reason: AclLogReason) => void,
  ) {
    this.log = new AclLog(() => this.config.acl.logMaxLen, onDenial);
    this.colocation = (config.colocate ?? []).length === 0 ? null : new KeyColocation(config.colocate!);
    this.sharedNames = this.colocation === null ? null : new KeyNames(null, this.colocation);
    const problem = this.rebuild(false);
    if (problem !== null) throw new Error(problem);
  }

  /** The colocation rules (config `colocate`), or null when there are none. */
  colocationRules(): KeyColocation | null {
    return this.colocation;
  }

  /** The user named `name`, if any. */
  get(name: string): AclUser | undefined {
    return this.users.get(name);
  }

  get defaultUser(): AclUser {
    return this.users.get('default')!;
  }

  /** Valkey's authRequired(): the default user has a password or is off, so a new connection must AUTH. */
  authRequired(): boolean {
    const d = this.defaultUser;
    return !d.nopass || !d.enabled;
  }

  /** Every user, sorted by name as Valkey's rax walks them. */
  list(): AclUser[] {
    return [...this.users.values()].sort((a, b) => Buffer.compare(Buffer.from(a.name), Buffer.from(b.name)));
  }

  /** Users whose identity is mirrored (identity-mirror.ts keeps them on every node). */
  mirrored(): MirroredUser[] {
    const out: MirroredUser[] = [];
    for (const user of this.users.values()) if (user.upstream?.mode === 'mirror') out.push({ identity: user.upstream, user });
    return out;
  }

  /** Called after every change of users or of their identities. */
  onChange(listener: () => void): void {
    this.listeners.push(listener);
  }

  // ---- ACL SETUSER / DELUSER / LOAD / SAVE --------------------------------------------------

  /** ACL SETUSER name rules…: null on success, else Valkey's error text (nothing changed). */
  setUser(name: string, words: readonly string[]): string | null {
    if (/[\s\0]/.test(name)) return "ERR Usernames can't contain spaces or null characters";
    const existing = this.users.get(name);
    const staged = existing !== undefined ? cloneUser(existing) : newUser(name);
    try {
      applyRules(staged, words, this.table());
    } catch (e) {
      if (!(e instanceof AclRuleError)) throw e;
      return `ERR Error in ACL SETUSER modifier '${e.rule}': ${e.message}`;
    }
    if (existing !== undefined) {
      this.closeRevokedSubscribers(name, staged);
      copyUserInto(existing, staged);
    } else {
      this.users.set(name, staged);
      this.origins.set(name, 'runtime');
    }
    this.resolveIdentity(this.users.get(name)!);
    this.changed();
    return null;
  }

  /** ACL DELUSER names…: how many were deleted, or Valkey's error (for `default`, nothing deleted). */
  delUsers(names: readonly string[], caller: DirectoryClient | null): number | string {
    if (names.includes('default')) return "ERR The 'default' user cannot be removed";
    let deleted = 0;
    for (const name of names) {
      if (!this.users.delete(name)) continue;
      this.origins.delete(name);
      deleted++;
      this.closeClientsOf(name, caller);
    }
    if (deleted > 0) this.changed();
    return deleted;
  }

  /** ACL LOAD: the file's users replace the file's and run-time users (all or nothing); null or the error text. */
  load(caller: DirectoryClient | null): string | null {
    if (this.config.acl.file === null) return NO_FILE;
    return this.rebuild(false, caller);
  }

  /** ACL SAVE: every user not from the configuration, in the ACL file. Null or the error text. */
  save(): string | null {
    const file = this.config.acl.file;
    if (file === null) return NO_FILE;
    const users = this.list().filter((u) => this.origins.get(u.name) !== 'config');
    try {
      writeAclFile(file, aclFileText(users));
    } catch {
      return 'ERR There was an error trying to save the ACLs. Please check the server logs for more information';
    }
    for (const u of users) this.origins.set(u.name, 'file');
    return null;
  }

  /**
   * SIGHUP, after the running config changed in place: the configuration's users and the ACL file
   * are read again (run-time users stay only when there is no file, as ACL LOAD would drop them).
   * Null, or why the users were kept as they were.
   */
  reload(): string | null {
    return this.rebuild(true);
  }

  // ---- building -------------------------------------------------------------------------------

  /** Configured users + the file's (+ run-time ones when asked and there is no file), installed in place. */
  private rebuild(keepRuntime: boolean, caller: DirectoryClient | null = null): string | null {
    const table = this.table();
    const next = new Map<string, { user: AclUser; origin: Origin }>();
    try {
      for (const u of this.config.users) next.set(u.name, { user: compileUser(u.name, rulesOf(u), table), origin: 'config' });
    } catch (e) {
      if (!(e instanceof AclRuleError)) throw e;
      return `ERR users: ${e.message}`; // checked at config load against the built-in table; the node's may differ
    }
    const file = this.config.acl.file;
    if (file !== null) {
      const read = readAclFile(file, table, new Set(this.config.users.map((u) => u.name)));
      if ('error' in read) return `ERR ${read.error}`;
      for (const f of read.users) next.set(f.name, { user: f.user, origin: 'file' });
    } else if (keepRuntime) {
      for (const [name, origin] of this.origins) {
        if (origin === 'runtime' && name !== 'default' && !next.has(name)) next.set(name, { user: cloneUser(this.users.get(name)!), origin });
      }
    }
    this.open = this.config.users.length === 0 && file === null;
    if (!next.has('default')) {
      // No users: Valkey's default user, which may also run RESPOOL. Users but no default: off.
      const rules = this.open ? ['+@all', '~*', '&*', 'on', 'nopass'] : ['reset'];
      const user = compileUser('default', rules, table);
      user.respoolAdmin = this.open;
      next.set('default', { user, origin: file !== null ? 'file' : 'runtime' });
    }
    this.install(next, caller);
    return null;
  }

  private install(next: Map<string, { user: AclUser; origin: Origin }>, caller: DirectoryClient | null): void {
    for (const name of [...this.users.keys()]) {
      if (next.has(name)) continue;
      this.users.delete(name);
      this.origins.delete(name);
      this.closeClientsOf(name, caller);
    }
    for (const [name, { user, origin }] of next) {
      const existing = this.users.get(name);
      if (existing !== undefined) {
        this.closeRevokedSubscribers(name, user);
        copyUserInto(existing, user);
      } else {
        this.users.set(name, user);
      }
      this.origins.set(name, origin);
      this.resolveIdentity(this.users.get(name)!);
    }
    this.changed();
  }

  /** acl.upstream 'auto': whether respool's identity may manage ACL users on the nodes (set by the check at start and at each discovery). */
  private nodesAllowMirror = false;

  /** Restricted users without users[].upstream get a mirrored identity: acl.upstream mirror, or auto where the nodes allow it. */
  private mirrorsByDefault(): boolean {
    const mode = this.config.acl.upstream;
    return mode === 'mirror' || (mode === 'auto' && this.nodesAllowMirror);
  }

  /** acl.upstream 'auto': the nodes do (or no longer do) let respool's identity manage ACL users; every user's identity is worked out again. */
  setNodesAllowMirror(allowed: boolean): void {
    if (allowed === this.nodesAllowMirror) return;
    this.nodesAllowMirror = allowed;
    for (const user of this.users.values()) this.resolveIdentity(user);
    this.changed();
  }

  /**
   * Works out (again) the names `user`'s commands use on the nodes (its namespace) and who they
   * run as there. A namespaced user runs as its mirrored identity whatever its rules: a script
   * could name another namespace's keys, so only a node that applies the namespace as its key
   * pattern (identity-mirror.ts) may run what respool cannot check itself. respool's own check
   * (on the client's names) is still skipped for a user whose rules allow everything.
   */
  private resolveIdentity(user: AclUser): void {
    const configured = this.config.users.find((u) => u.name === user.name);
    const tenant = configured?.tenant === undefined ? undefined : this.config.tenants?.find((t) => t.name === configured.tenant);
    const prefix = configured?.keyPrefix ?? tenant?.keyPrefix ?? undefined; // a user gives one or its tenant does (config/file-config.ts)
    if (prefix === undefined) user.keyNames = this.sharedNames;
    else if (user.keyNames?.namespace?.toString('utf8') !== prefix) user.keyNames = new KeyNames(Buffer.from(prefix, 'utf8'), this.colocation);
    const namespaced = user.keyNames?.namespace != null;
    const setting: UpstreamSetting | undefined = configured?.upstream;
    let identity: UpstreamIdentity | null = null;
    if (setting !== undefined && setting !== 'mirror' && setting !== 'none') {
      identity = mappedIdentity(user.name, setting.username, setting.password);
    } else if (setting === 'mirror' || (setting === undefined && this.mirrorsByDefault() && (!user.unrestricted || namespaced))) {
      // An explicit `mirror` is honoured for any user; the default only for restricted or
      // namespaced ones (a full-access user can do nothing as its own identity that it cannot do as respool's).
      identity = mirrorIdentity(user.name, this.config.acl.mirrorPrefix, mirrorSecretOf(this.config));
    }
    if (identity !== null) {
      const known = this.identities.get(identity.key);
      if (known !== undefined && known.password === identity.password) identity = known;
      else this.identities.set(identity.key, identity);
      identity.replicaReads = user.allCommands || user.allowed.has('readonly');
    }
    user.upstream = identity;
  }

  private changed(): void {
    for (const listener of this.listeners) listener();
  }

  // ---- clients --------------------------------------------------------------------------------

  private closeClientsOf(name: string, caller: DirectoryClient | null): void {
    for (const client of this.clients()) if (client.user === name) client.close(caller !== null && client.id === caller.id);
  }

  /** Valkey's ACLKillPubsubClientsIfNeeded: a subscriber of `name` holding a channel the new rules deny is closed. */
  private closeRevokedSubscribers(name: string, next: AclUser): void {
    if (next.allChannels) return;
    for (const client of this.clients()) {
      if (client.user !== name) continue;
      const subs = client.subscribedNames();
      if (subs === null) continue;
      const revoked =
        subs.patterns.some((p) => !channelAllowed(next, p, true))
        || subs.channels.some((c) => !channelAllowed(next, c, false))
        || subs.shardChannels.some((c) => !channelAllowed(next, c, false));
      if (revoked) client.close(false);
    }
  }
}
