import type { Transaction } from './transaction-state.js';
import type { WriteMark } from '../nearcache/near-cache.js';
import type { WatchLane } from './watch-lane.js';
import type { TrackingLanes } from './tracking-lanes.js';
import type { ClientSubscriptions } from '../pubsub/client-subscriptions.js';
import type { AclUser } from '../acl/rules.js';
import type { ReplyNames } from '../keys/reply-names.js';
import type { Tenant } from '../tenants/tenant.js';

/** Where a client's users come from (the user directory, src/acl/user-directory.ts). */
export interface UserSource {
  /** Valkey's authRequired(): a new (or RESET) connection must AUTH before anything else. */
  authRequired(): boolean;
  readonly defaultUser: AclUser;
}

/** No keys: one array shared by every client that is not blocked (a client costs no array of its own). */
const NO_KEYS: readonly string[] = Object.freeze([]);

/**
 * What respool knows about one client connection, in one place: protocol, database, name,
 * library, authenticated user, and the state of its session modes (transaction, subscriptions,
 * a leased connection). Handlers change it through these methods only.
 */
export class ClientState {
  protocol: 2 | 3 = 2;
  /**
   * The database the client SELECTed (standalone upstreams; always 0 in a cluster). Its commands
   * go on the shared links and leased connections of this database (upstream-pools.ts,
   * lease-pools.ts). Changed by SELECT (handlers/local.ts; on a WATCH lane when the server
   * answered, handlers/watch-lane.ts; at EXEC for a SELECT inside MULTI, handlers/transaction.ts)
   * and RESET.
   */
  db = 0;
  name: string | null = null;
  libName = '';
  libVersion = '';
  /** The authenticated user, or null while AUTH is still required. */
  user: string | null;
  /**
   * That user (src/acl/rules.ts: its permissions, checked in handlers/index.ts unless it is
   * unrestricted, and its upstream identity); the default user until AUTH. The directory changes
   * it in place when ACL SETUSER / LOAD change the user.
   */
  acl: AclUser;
  /** MULTI … EXEC in progress (queued by respool, or forwarded on a lease after WATCH). */
  transaction: Transaction | null = null;
  /** Writes queued in MULTI that the near cache holds off fills for until EXEC's reply (handlers/near-cache.ts). */
  cacheWrites: WriteMark[] | null = null;
  /** Reads the near cache took from this client and has not answered yet (a write waits for them: handlers/index.ts). */
  cacheReadsPending = 0;
  /** Every near-cache write mark of this client not ended yet (ended at close if a reply never came). */
  cacheMarks: Set<WriteMark> | null = null;
  /** Channels, patterns and shard channels this client holds; null until its first SUBSCRIBE. */
  subscriptions: ClientSubscriptions | null = null;
  /** A blocking command is waiting on a leased connection (INFO clients: blocked_clients). */
  blocked = false;
  /** The keys it waits on (INFO clients: total_blocking_keys), latin1. */
  blockedKeys: readonly string[] = NO_KEYS;
  /** It also unblocks when its key is deleted (XREADGROUP: total_blocking_keys_on_nokey). */
  blockedOnNoKey = false;
  /** WATCH … EXEC: every command goes on this leased connection (watch-lane.ts; which ones: handlers/watch-lane.ts). */
  lane: WatchLane | null = null;
  /** The leased connection in use, if any: what to do with it if the client goes away. */
  lease: { abandon(): void; unblock?(how: 'timeout' | 'error'): Promise<boolean> } | null = null;
  /** CLIENT TRACKING ON: the client's leased connections, one per node (tracking-lanes.ts). */
  tracking: TrackingLanes | null = null;
  /** CLIENT LIST / INFO: the last command's table name ("client|list"), 'NULL' before any or for an unknown one. */
  lastCommand = 'NULL';
  /** CLIENT LIST / INFO tot-cmds: commands completed so far (a blocking one once it is served, as Valkey counts). */
  commandCount = 0;
  /** It asked CLIENT INFO: with clients.scriptCommandCounts self, the commands its scripts run count in commandCount from then on. */
  readsOwnCount = false;
  /** A blocking command is counted in commandCount when it unblocks. */
  private countOnUnblock = false;
  /** CLIENT LIST / INFO idle: performance.now() of the last bytes read from the client. */
  lastInteraction = performance.now();
  /**
   * SYNC / PSYNC made this client a replica (handlers/replication.ts): it gets the replication
   * stream, and its requests (REPLCONF ACK) are read and dropped, as Valkey answers a replica nothing.
   */
  replicaStream = false;
  /** A request is held back by CLIENT PAUSE (INFO clients counts it blocked, as Valkey's postponed clients). */
  pausedHeld = false;
  /** MONITOR: the client gets every command's line (monitor-feed.ts) until RESET or close. */
  monitoring = false;
  /** Its user's tenant (src/tenants), whose limits hold back its requests; null: the default tenant (the session keeps it: joinTenant). */
  tenant: Tenant | null = null;

  /** CLIENT REPLY OFF / SKIP (Valkey's reply_off, reply_skip_next, reply_skip flags). */
  private replyOff = false;
  private replySkipNext = false;
  private replySkip = false;

  constructor(
    /** A client starts (and RESETs) as the default user, authenticated unless it needs AUTH. */
    private readonly users: UserSource,
  ) {
    this.user = users.authRequired() ? null : 'default';
    this.acl = users.defaultUser;
  }

  setProtocol(protocol: 2 | 3): void {
    this.protocol = protocol;
  }

  /** SELECT: the caller checked the index against the upstream's databases. */
  select(db: number): void {
    this.db = db;
  }

  setName(name: string): void {
    this.name = name === '' ? null : name;
  }

  setLib(attr: 'lib-name' | 'lib-ver', value: string): void {
    if (attr === 'lib-name') this.libName = value;
    else this.libVersion = value;
  }

  authenticate(user: string, acl: AclUser): void {
    this.user = user;
    this.acl = acl;
  }

  get authenticated(): boolean {
    return this.user !== null;
  }

  /** In RESP2, a client with subscriptions may only run the subscribe family, PING, QUIT, RESET. */
  get subscribedResp2(): boolean {
    return this.protocol === 2 && this.subscriptions !== null && this.subscriptions.total() > 0;
  }

  block(keys: readonly string[], onNoKey: boolean): void {
    this.blocked = true;
    this.blockedKeys = keys;
    this.blockedOnNoKey = onNoKey;
  }

  unblock(): void {
    if (this.countOnUnblock) this.commandCount++;
    this.countOnUnblock = false;
    this.blocked = false;
    this.blockedKeys = NO_KEYS;
    this.blockedOnNoKey = false;
  }

  /** True while replies are not to be written (CLIENT REPLY OFF, or the command after SKIP). */
  get repliesSuppressed(): boolean {
    return this.replyOff || this.replySkip;
  }

  /** CLIENT REPLY ON | OFF | SKIP. */
  setReplyMode(mode: 'on' | 'off' | 'skip'): void {
    if (mode === 'on') {
      this.replyOff = false;
      this.replySkip = false;
    } else if (mode === 'off') {
      this.replyOff = true;
    } else if (!this.replyOff) {
      this.replySkipNext = true;
    }
  }

  /** Set while one request is handled when it was refused before running (ACL, modes): tot-cmds does not count it. */
  refusedNow = false;

  /**
   * Set while one request is handled inside MULTI: how its reply's key names turn back into the
   * client's (keys/reply-names.ts), for the transaction to keep with the queued command and
   * apply to its element of EXEC's array; null when the reply names no key.
   */
  queuedReplyNames: ReplyNames | null = null;

  /** EXEC ran the transaction (its reply an array of N results): the N commands count as run (Valkey's call() per queued command). */
  execRan(reply: Buffer): void {
    if (reply[0] !== 0x2a /* * */ || reply[1] === 0x2d /* *-1: aborted by WATCH */) return;
    let n = 0;
    for (let i = 1; i < reply.length && reply[i] !== 0x0d; i++) n = n * 10 + reply[i]! - 0x30;
    this.commandCount += n;
  }

  /**
   * After each command: SKIP applies to the one command that follows it. `counted`: false for a
   * command Valkey does not count yet (a blocking one, counted at unblock(); one it rejects unknown).
   */
  commandDone(counted: boolean, countAtUnblock = false): void {
    if (counted) this.commandCount++;
    else if (countAtUnblock) this.countOnUnblock = true;
    this.replySkip = this.replySkipNext;
    this.replySkipNext = false;
  }

  /** RESET: protocol 2, database 0, no name, authentication required again when users are configured. */
  reset(): void {
    this.protocol = 2;
    this.db = 0;
    this.name = null;
    this.user = this.users.authRequired() ? null : 'default';
    this.acl = this.users.defaultUser;
    this.transaction = null;
    this.tracking?.close(true); // tracking off, once the lanes answered what they owe
    this.tracking = null;
    this.monitoring = false; // the caller takes it off the monitor feed
    this.setReplyMode('on');
  }

  /** The client went away: hand back what it held upstream. */
  release(): void {
    this.lease?.abandon();
    this.lease = null;
    this.tracking?.close(false);
    this.tracking = null;
  }
}
