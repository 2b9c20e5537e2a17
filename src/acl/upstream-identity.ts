// Who a respool user's commands run as on the nodes. respool checks its users' rules itself, but
// a script, a function or a SORT … GET pattern touches keys the request does not name: only the
// node can check those. A user given an upstream identity has every command sent on links
// authenticated as that identity, so Valkey applies the user's rules to whatever the command does.
//
//   mapped : an ACL user the operator created on the nodes (users[].upstream: {username, password})
//   mirror : respool keeps a user `<acl.mirrorPrefix><name>` with the same rules on every node
//            (src/upstream/identity-mirror.ts), with a password derived from acl.mirrorSecret

import { nodeCrypto, onFirstUse } from '../util/lazy-builtins.js';

export type IdentityMode = 'mapped' | 'mirror';

export interface UpstreamIdentity {
  /** The respool user it serves (the name clients AUTH with). */
  readonly user: string;
  readonly mode: IdentityMode;
  /** The ACL user on the nodes. */
  readonly username: string;
  readonly password: string;
  /** Distinguishes its links from every other identity's (pool keys, metric label: the respool user). */
  readonly key: string;
  /**
   * The user may run READONLY, which a replica link needs: only then do its reads follow the
   * read strategy; otherwise they go to the primaries. Kept up to date by the user directory.
   */
  replicaReads: boolean;
}

/** A user's `upstream` setting, as the configuration gives it. */
export type UpstreamSetting = 'mirror' | 'none' | { username: string; password: string };

export function mappedIdentity(user: string, username: string, password: string): UpstreamIdentity {
  return { user, mode: 'mapped', username, password, key: `mapped:${user}:${username}`, replicaReads: false };
}

/**
 * The mirrored user's password: derived from a secret every instance of a fleet shares, so that
 * instances mirroring the same user agree on it (a random one per process would make each
 * instance's ACL SETUSER lock the others' new links out).
 */
export function mirrorPassword(secret: string, user: string): string {
  return nodeCrypto().createHmac('sha256', secret).update(`respool-mirror:${user}`).digest('hex');
}

export function mirrorIdentity(user: string, prefix: string, secret: string): UpstreamIdentity {
  const username = `${prefix}${user}`;
  return { user, mode: 'mirror', username, password: mirrorPassword(secret, user), key: `mirror:${username}`, replicaReads: false };
}

/** The secret mirrored passwords derive from: acl.mirrorSecret, else upstreamAuth's password, else one made per process. */
export function mirrorSecretOf(config: { acl: { mirrorSecret: string | null }; upstreamAuth: { password: string } | null }): string {
  return config.acl.mirrorSecret ?? config.upstreamAuth?.password ?? processSecret();
}

const processSecret = onFirstUse(() => nodeCrypto().randomBytes(32).toString('hex'));

/**
 * A node's error reply as the client should see it: Valkey names the user in some errors ("User
 * respool.app has no permissions to run the 'set' command"), and the client knows its user as
 * respool's name for it. Other bytes are kept.
 */
export function asSeenByClient(frame: Buffer, identity: UpstreamIdentity): Buffer {
  if (identity.username === identity.user) return frame;
  const from = Buffer.from(`User ${identity.username} `);
  let at = frame.indexOf(from);
  if (at < 0) return frame;
  const to = Buffer.from(`User ${identity.user} `);
  const parts: Buffer[] = [];
  let start = 0;
  while (at >= 0) {
    parts.push(frame.subarray(start, at), to);
    start = at + from.length;
    at = frame.indexOf(from, start);
  }
  parts.push(frame.subarray(start));
  return Buffer.concat(parts);
}
