import type { Logger } from 'pino';
import { decodeReply } from '../resp/decode.js';
import type { RateLimitedLog } from '../util/rate-limited-log.js';
import type { UserDirectory } from '../acl/user-directory.js';
import { describeKeys, hashPassword, keyFlags, type AclUser } from '../acl/rules.js';
import type { UpstreamIdentity } from '../acl/upstream-identity.js';
import type { AclLogContext, AclLogReason } from '../acl/acl-log.js';
import type { IdentityHooks, UpstreamPools } from './upstream-pools.js';

/** A node as the mirror reads it from a topology snapshot (cluster/topology.ts ClusterNode). */
interface TopologyNode {
  readonly address: string;
  readonly role: 'primary' | 'replica';
  readonly runId?: string;
}

/** What the mirror knows of one node. */
interface NodeRecord {
  readonly host: string;
  readonly port: number;
  readonly address: string;
  role: 'primary' | 'replica';
  /** INFO server run_id when last applied; a different one means the node restarted (users lost). */
  runId: string | null;
  /** The directory generation last applied there; -1: never, or must be applied again. */
  applied: number;
  applying: Promise<void> | null;
  /** The mirrored usernames it holds (to delete the ones respool no longer mirrors). */
  usernames: Set<string>;
  /** The last ACL LOG entry id imported from it, and the run it belongs to. */
  logEntry: number;
  logRun: string | null;
  importing: boolean;
}

/**
 * Keeps each mirrored user's identity (users[].upstream: mirror, acl.upstream: mirror) on every
 * node: `ACL SETUSER <prefix><name> reset on … #<password hash> <the user's keys, channels and
 * commands>`, sent through respool's own upstreamAuth identity, which needs the right to run ACL
 * SETUSER there.
 *
 *   when     : before the first identity connection to a node (prepare, one flight per node);
 *              on every topology discovery, for each node that is new, restarted (another run_id)
 *              or behind the directory's generation (a reload, ACL SETUSER / DELUSER / LOAD);
 *              after a node refused an identity's password (a restart that discovery has not
 *              seen yet), at the next dial
 *   deleted  : a user no longer mirrored is ACL DELUSER'd on the nodes it was applied to (the
 *              node closes its connections), and its pools here are closed
 *   failure  : a node that refuses (no ACL SETUSER rights: managed services) fails that user's
 *              connections to it with an error saying so; nothing else is affected
 *   ACL LOG  : a node's denial of an identity's command (a script refused by Valkey) is read back
 *              from the node's ACL LOG and added to respool's, under the respool user's name
 */
export class IdentityMirror implements IdentityHooks {
  private generation = 0;
  private readonly nodes = new Map<string, NodeRecord>();
  /** The identities of the last directory change, by key (to close the pools of removed ones). */
  private identities = new Map<string, UpstreamIdentity>();

  constructor(
    private readonly deps: {
      users: UserDirectory;
      pools: UpstreamPools;
      /** Closes the pools of an identity no longer in use (shared links; leases close with their clients). */
      closeIdentity(identity: UpstreamIdentity): void;
      events: RateLimitedLog;
      log: Logger;
    },
  ) {
    this.identities = this.currentIdentities();
    deps.users.onChange(() => this.onUsersChanged());
  }

  // ---- IdentityHooks --------------------------------------------------------------------------

  prepare(identity: UpstreamIdentity, address: string): Promise<void> {
    if (identity.mode !== 'mirror') return Promise.resolve();
    const record = this.record(address);
    if (record.applied === this.generation && record.usernames.has(identity.username)) return Promise.resolve();
    return this.apply(record);
  }

  refused(identity: UpstreamIdentity, address: string): void {
    if (identity.mode !== 'mirror') {
      this.deps.events.emit('error', 'identity_refused', `${address}|${identity.key}`, { node: address, user: identity.user, upstreamUser: identity.username },
        `node ${address} refused the password of ${identity.username}, the upstream identity of user ${identity.user} (users[].upstream)`);
      return;
    }
    const record = this.record(address);
    record.applied = -1; // lost with a restart discovery has not seen yet: made again at the next dial
  }

  // ---- keeping in step ------------------------------------------------------------------------

  /** After each discovery (a cluster/topology.ts snapshot): nodes that are new, restarted or behind get the mirrored users. */
  onTopology(topology: { allNodes(): Iterable<TopologyNode> }): void {
    for (const node of topology.allNodes()) {
      const record = this.record(node.address);
      record.role = node.role;
      const runId = node.runId ?? null;
      if (runId !== null && record.runId !== null && runId !== record.runId) record.applied = -1;
      if (runId !== null) record.runId = runId;
    }
    for (const record of this.nodes.values()) if (record.applied < this.generation) void this.apply(record).catch(() => {});
  }

  /** Nodes whose users match the directory now (for tests and /topology). */
  syncedNodes(): string[] {
    return [...this.nodes.values()].filter((r) => r.applied === this.generation && r.applying === null).map((r) => r.address);
  }

  private onUsersChanged(): void {
    this.generation++;
    const next = this.currentIdentities();
    for (const [key, identity] of this.identities) if (!next.has(key)) this.deps.closeIdentity(identity);
    this.identities = next;
    if (this.deps.users.mirrored().length === 0 && [...this.nodes.values()].every((r) => r.usernames.size === 0)) return;
    for (const record of this.nodes.values()) void this.apply(record).catch(() => {});
  }

  private currentIdentities(): Map<string, UpstreamIdentity> {
    const out = new Map<string, UpstreamIdentity>();
    for (const u of this.deps.users.list()) if (u.upstream !== null) out.set(u.upstream.key, u.upstream);
    return out;
  }

  private record(address: string): NodeRecord {
    let record = this.nodes.get(address);
    if (record === undefined) {
      const at = address.lastIndexOf(':');
      record = {
        host: address.slice(0, at), port: Number(address.slice(at + 1)), address, role: 'primary',
        runId: null, applied: -1, applying: null, usernames: new Set(), logEntry: -1, logRun: null, importing: false,
      };
      this.nodes.set(address, record);
    }
    return record;
  }

  /** One flight per node; a change made meanwhile is applied by a second round. */
  private apply(record: NodeRecord): Promise<void> {
    if (record.applying !== null) {
      return record.applying.then(() => (record.applied === this.generation ? undefined : this.apply(record)));
    }
    const generation = this.generation;
    const run = this.send(record).then(
      () => {
        record.applying = null;
        record.applied = generation;
      },
      (err: Error) => {
        record.applying = null;
        record.applied = -1;
        this.deps.events.emit('error', 'identity_mirror_failed', record.address, { node: record.address, err: err.message }, err.message);
        throw err;
      },
    );
    record.applying = run;
    return run;
  }

  private async send(record: NodeRecord): Promise<void> {
    const pool = this.deps.pools.get(record.host, record.port, 2, record.role);
    const mirrored = this.deps.users.mirrored();
    const wanted = new Set(mirrored.map((m) => m.identity.username));
    const commands: string[][] = mirrored.map(({ identity, user }) => ['ACL', 'SETUSER', identity.username, ...mirrorRules(user, identity)]);
    for (const name of record.usernames) if (!wanted.has(name)) commands.push(['ACL', 'DELUSER', name]);
    const replies = await Promise.all(commands.map((c) => pool.call(c)));
    replies.forEach((frame, i) => {
      if (frame[0] !== 0x2d /* - */) return;
      const [, verb, username] = commands[i]!;
      throw new Error(
        `could not ${verb === 'SETUSER' ? 'create' : 'delete'} the mirrored user ${username} on node ${record.address}: `
          + `${frame.toString('utf8', 1).trim()} (respool's upstreamAuth user needs ACL SETUSER there; on services that refuse it, `
          + 'give the user a mapped identity: users[].upstream: {username, password})',
      );
    });
    record.usernames = wanted;
    this.deps.log.debug({ node: record.address, users: [...wanted] }, 'mirrored users applied');
  }

  // ---- the nodes' ACL LOG ---------------------------------------------------------------------

  /**
   * A node answered an identity's command with a permission error: its ACL LOG entries for
   * respool's identities since the last import go to respool's log, named by the respool user, with the
   * client's CLIENT LIST line (the node only knows respool's link).
   */
  importDenials(address: string, clientInfo: string): void {
    const record = this.record(address);
    if (record.importing) return;
    record.importing = true;
    const pool = this.deps.pools.get(record.host, record.port, 2, record.role);
    pool.call(['ACL', 'LOG', '128']).then((frame) => {
      record.importing = false;
      const reply = decodeReply(frame);
      if (!Array.isArray(reply)) return;
      const entries: Array<{ id: number; reason: AclLogReason; context: AclLogContext; object: string; username: string; created: number }> = [];
      for (const item of reply) {
        const e = fields(item);
        if (e === null) continue;
        entries.push(e);
      }
      // Entry ids restart with the node: a new run (another run_id) imports from the start.
      if (record.logRun !== record.runId) {
        record.logRun = record.runId;
        record.logEntry = -1;
      }
      for (const e of entries.reverse()) {
        if (e.id <= record.logEntry) continue;
        record.logEntry = e.id;
        const user = this.userOfIdentity(e.username);
        if (user === null) continue;
        this.deps.users.log.add(e.reason, e.context, e.object, user, clientInfo);
      }
    }, () => {
      record.importing = false;
    });
  }

  private userOfIdentity(username: string): string | null {
    for (const identity of this.identities.values()) if (identity.username === username) return identity.user;
    return null;
  }
}

/**
 * The rules a mirrored user gets on the nodes: the respool user's, with the identity's password
 * and no respool-only parts. Its key and channel patterns are turned into the stored names' (a
 * namespace, colocation rules: keys/key-names.ts), so that a script naming a key it did not
 * declare is judged by the node on the names it really reaches.
 */
export function mirrorRules(user: AclUser, identity: UpstreamIdentity): string[] {
  const out = ['reset', 'on', user.skipSanitize ? 'skip-sanitize-payload' : 'sanitize-payload', `#${hashPassword(identity.password)}`];
  const names = user.keyNames;
  if (names === null) {
    const keys = describeKeys(user);
    if (keys !== '') out.push(...keys.split(' '));
  } else {
    const patterns = user.allKeys ? [{ flags: '~', pattern: STAR }] : user.keyPatterns.map((p) => ({ flags: keyFlags(p.flags), pattern: p.pattern }));
    for (const { flags, pattern } of patterns) for (const stored of names.storedPatterns(pattern)) out.push(flags + stored.toString('utf8'));
  }
  if (user.allChannels && names?.namespace == null) out.push('&*');
  else {
    out.push('resetchannels');
    const channels = user.allChannels ? [STAR] : user.channels;
    for (const c of channels) out.push(`&${(names?.storedChannel(c, true) ?? c).toString('utf8')}`);
  }
  out.push(user.future ? '+@all' : '-@all');
  for (const rule of user.commandRules) if (rule.slice(1).toLowerCase() !== '@respool-admin') out.push(rule);
  return out;
}

const STAR = Buffer.from('*');

/** One ACL LOG entry of a node's reply (a map in RESP3, a flat array in RESP2). */
function fields(item: unknown): { id: number; reason: AclLogReason; context: AclLogContext; object: string; username: string; created: number } | null {
  const map = new Map<string, unknown>();
  if (item instanceof Map) for (const [k, v] of item) map.set(String(k), v);
  else if (Array.isArray(item)) for (let i = 0; i + 1 < item.length; i += 2) map.set(String(item[i]), item[i + 1]);
  else return null;
  const id = Number(map.get('entry-id'));
  const reason = String(map.get('reason')) as AclLogReason;
  const context = String(map.get('context')) as AclLogContext;
  if (!Number.isFinite(id)) return null;
  return { id, reason, context, object: String(map.get('object')), username: String(map.get('username')), created: Number(map.get('timestamp-created')) };
}

/** An error reply that is a permission denial by the node (NOPERM, or a script's ACL failure). */
export function isNodeDenial(frame: Buffer): boolean {
  if (frame[0] !== 0x2d) return false;
  const head = frame.toString('latin1', 1, Math.min(frame.length, 200));
  return head.startsWith('NOPERM') || head.includes('ACL failure in script') || head.includes('no permissions to') || head.includes('insufficient ACL permissions');
}


/** Errors that say the node cannot answer now, not what it allows: a busy script, a load, a failover. */
const NOT_NOW = /^-(BUSY|LOADING|TRYAGAIN|MASTERDOWN|CLUSTERDOWN|UNBLOCKED)\b/;

/**
 * What `ACL DRYRUN <respool's user> ACL SETUSER …` answered about mirroring (acl.upstream auto):
 * true for +OK, false for a denial (DRYRUN's reason, or an error such as NOPERM), null when the
 * node could not say now (BUSY while a script runs, LOADING …) — so what was known stays.
 */
export function mirrorVerdict(frame: Buffer): boolean | null {
  if (frame.toString('latin1', 0, 5) === '+OK\r\n') return true;
  return NOT_NOW.test(frame.toString('latin1', 0, 16)) ? null : false;
}
