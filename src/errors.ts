/**
 * Every error respool itself produces, in one table. Server errors (the upstream's own
 * "-ERR …", "-WRONGTYPE …") are forwarded untouched; these are proxy faults and policy
 * refusals, always prefixed "respool:" so a user can tell them apart from Valkey's.
 *
 * Each entry yields the error line without the leading "-" and without CRLF.
 */
export const ProxyError = {
  upstreamUnavailable: (node: string, cause: string) =>
    `ERR respool: upstream ${node} is unavailable (${cause})`,
  connectionLost: (node: string) =>
    `ERR respool: connection to upstream ${node} was lost; the command may or may not have run`,
  shed: (node: string, why: string) =>
    `ERR respool: request to upstream ${node} refused: ${why}; try again later`,
  maxClients: (max: number) => `ERR max number of clients reached (respool limit ${max})`,
  /** A tenant's clients at its limits.maxClients (src/tenants): Valkey's words, then whose limit. */
  tenantElsewhere: (user: string, tenant: string) =>
    `ERR respool: user ${user} is in tenant ${tenant}, whose keys are on other upstreams: AUTH as ${user} on a connection with no subscriptions, transaction, WATCH or tracking`,
  tenantMaxClients: (tenant: string, max: number | null) => `ERR max number of clients reached (tenant ${tenant}: limits.maxClients ${max ?? 'none'})`,
  outputBufferExceeded: (bytes: number, max: number) =>
    `ERR respool: closing this connection: ${bytes} bytes of unread replies exceed the limit of ${max}`,
  outputStalled: (bytes: number, ms: number) =>
    `ERR respool: closing this connection: it has not read ${bytes} bytes of replies for ${ms} ms (clients.outputStallMs)`,
  retryBudgetExhausted: (node: string, last: string) =>
    `ERR respool: not retrying on upstream ${node}: its retry budget is spent (last: ${last})`,
  timeout: (node: string, ms: number) =>
    `ERR respool: upstream ${node} did not answer within ${ms} ms; the command may or may not have run`,
  tooManyRedirects: (command: string, max: number) =>
    `ERR respool: ${command} was redirected more than ${max} times; giving up`,
  retriesExhausted: (command: string, last: string) =>
    `ERR respool: ${command} still failing after retries (last: ${last})`,
  refused: (command: string, why: string) =>
    `ERR respool: ${command.replace('|', ' ').toUpperCase()} is not supported through respool: ${why}`,
  /** A client key name that is another key's stored form under the colocation rules (keys/request-names.ts). */
  colocatedNameTaken: (key: string) => `ERR key name '${key}' is the stored form of another key under respool's colocation rules: rename it`,
  crossSlot: () => `CROSSSLOT Keys in request don't hash to the same slot`,
  /** Valkey's CROSSSLOT text first (clients match on it), then why respool cannot split WATCH and what to do. */
  watchCrossSlot: () =>
    `CROSSSLOT Keys in request don't hash to the same slot (respool: WATCH over keys in several slots cannot be made safe, since one node could commit while another aborts; put the watched keys and the transaction's keys under one hash tag, e.g. {user:42}:balance and {user:42}:history, or have respool store them so with a colocation rule: docs/key-names.md)`,
  crossSlotTransactionTracking: () =>
    `CROSSSLOT Keys in request don't hash to the same slot (respool: a transaction over keys in several slots is not split while CLIENT TRACKING is on, because its commands run on the client's own connection to one node; put its keys under one hash tag, or turn tracking off)`,
  /** A read over several slots (handlers/cross-slot/reads.ts) could not copy its inputs to one node. */
  copyFailed: (command: string, error: string) =>
    `ERR respool: ${command.toUpperCase()} over keys in several slots runs on copies of them on one node, and copying failed: ${error}`,
  crossSlotCopyTooLarge: (command: string, bytes: number, limit: string) =>
    `ERR respool: ${command.toUpperCase()} over keys in several slots runs on copies of them on one node; they are ${bytes} bytes, more than limits.maxCrossSlotCopyBytes (${limit}): put the keys under one hash tag, or raise the limit`,
  destinationFailed: (command: string, error: string) =>
    `ERR respool: ${command.toUpperCase()} over keys in several slots computed its result, but writing the destination failed: ${error}`,
  /** One slot's block of a split transaction failed (handlers/cross-slot/transaction-split.ts); `node` may be "" when none served the slot. */
  splitGroupFailed: (slot: number, node: string, ran: boolean, why: string) =>
    `ERR respool: the transaction was split by slot; its block for slot ${slot}${node === '' ? '' : ` on ${node}`} ${ran ? 'may or may not have run' : 'did not run'} (${why.replace(/^ERR /, '')}); the blocks for other slots were not undone`,
  slotNotServed: (slot: number) => `CLUSTERDOWN Hash slot ${slot} not served`,
  topologyUnknown: () => `CLUSTERDOWN respool: cluster topology not known yet`,
  tooManyPending: (max: number) =>
    `ERR respool: too many pending requests on this connection (limit ${max})`,
  wrongArity: (command: string) => `ERR wrong number of arguments for '${command}' command`,
  // SELECT: Valkey 8.0.1's texts (db.c selectCommand, object.c getIntFromObjectOrReply).
  selectNotAllowed: () => `ERR SELECT is not allowed in cluster mode`,
  dbOutOfRange: () => `ERR DB index is out of range`,
  invalidDb: () => `ERR value is not an integer or out of range`,
  intOutOfRange: () => `ERR value is out of range, value must between -2147483648 and 2147483647`,
  selectWhileTracking: () =>
    `ERR respool: SELECT of another database is not supported while CLIENT TRACKING is on (the tracking connections stay in database 0); turn tracking off first`,
  trackingOutsideDb0: (db: number) =>
    `ERR respool: CLIENT TRACKING is only supported in database 0 (this connection selected database ${db}); SELECT 0 first`,
  noAuth: () => `NOAUTH Authentication required.`,
  wrongPass: () => `WRONGPASS invalid username-password pair or user is disabled.`,
  authNotConfigured: () =>
    `ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?`,
  noProto: () => `NOPROTO unsupported protocol version`,
  syntax: () => `ERR syntax error`,
  unknownSubcommand: (sub: string, command: string) =>
    `ERR unknown subcommand '${sub.slice(0, 128)}'. Try ${command.toUpperCase()} HELP.`.replace(/[\r\n]/g, ' '),
  shuttingDown: () => `ERR respool: shutting down`,
  splitKeyUnsupported: (command: string, key: string, why: string) =>
    `ERR respool: ${command} cannot be applied to split key '${key}': ${why}`,
  splitWritePartial: (command: string, key: string, failed: number, total: number, first: string) =>
    `ERR respool: ${command} on split key '${key}' failed on ${failed} of ${total} copies (${first}); the copies are being repaired from the original`,
  hotKeysOff: () => `ERR respool: hot-key detection is off (hotKeys.detection.enabled)`,
  /** A fleet member past its lease on the shared state (fleet/fleet-state.ts): the write was not sent. */
  fleetStateUnconfirmed: (ms: number) =>
    `TRYAGAIN respool: this instance has not confirmed the fleet's shared state for ${ms} ms (it was paused or stalled); the command was not sent, try again`,
  splitKeyBusy: (key: string) =>
    `TRYAGAIN respool: too many commands wait for split key '${key}' while its copies are filled; the command was not sent, try again`,
  /** RESPOOL SPLIT ADD / DEL that the fleet could not complete (members named in `why`). */
  fleetSplitRefused: (what: string, why: string) => `ERR respool: ${what}: ${why}`,
  pubsubNotConfirmed: (what: string, ms: number) =>
    `ERR respool: the upstream did not confirm ${what} within ${ms} ms; not subscribed`,
  /** Valkey 8.0 server.c processCommand: (P|S)UNSUBSCRIBE from a client holding no subscription at all. */
  notSubscribed: (command: 'unsubscribe' | 'punsubscribe' | 'sunsubscribe') =>
    `NOSUB '${command}' command executed not in subscribed mode`,
  /** Valkey 8.0 server.c processCommand: a RESP2 client in subscribed mode; `fullname` as Valkey prints it ("get", "client|list"). */
  subscribedContextOnly: (fullname: string) =>
    `ERR Can't execute '${fullname}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context`,
  leaseLimitReached: (node: string, waitedMs: number, limit: 'dedicated.maxPerNode' | 'dedicated.maxTotal', value: number) =>
    `ERR respool: no leased upstream connection to ${node} within ${waitedMs} ms (${limit} ${value} reached)`,
  trackingRedirectTwice: () => `ERR A client can only redirect to a single other client`,
  trackingRedirectNoClient: () => `ERR The client ID you want redirect to does not exist`,
  trackingTurnedOff: () => `ERR respool: client tracking was turned off while a connection for it was being opened`,
  trackingSplitKey: (command: string) =>
    `ERR respool: ${command.replace('|', ' ').toUpperCase()} touches a split hot key, which a client with CLIENT TRACKING cannot use: its commands run on its own connection to the key's primary, where the key's copies would be neither written nor tracked`,
  trackingInMulti: (command: string) =>
    `ERR respool: ${command.replace('|', ' ').toUpperCase()} cannot be queued inside MULTI through respool (respool holds the client's tracking state); send it outside the transaction`,
  /** Valkey 8.0 networking.c clientCommand "caching". */
  cachingNotTracking: () => `ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled`,
  cachingYesNotOptin: () => `ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.`,
  cachingNoNotOptout: () => `ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.`,
  // Valkey's own texts (server.c, multi.c), for what respool decides in its place.
  execWithoutMulti: () => `ERR EXEC without MULTI`,
  discardWithoutMulti: () => `ERR DISCARD without MULTI`,
  notAllowedInMulti: () => `ERR Command not allowed inside a transaction`,
  execAbort: () => `EXECABORT Transaction discarded because of previous errors.`,
  /** multi.c execCommandAbort: `error` without its code's "-". */
  execAbortBecause: (error: string) => `EXECABORT Transaction discarded because of: ${error.replace(/^ERR /, '')}`,
  unknownCommand: (args: readonly Buffer[]) => {
    let list = '';
    for (let i = 1; i < args.length && list.length < 128; i++) list += `'${args[i]!.toString('utf8').slice(0, 128 - list.length)}' `;
    return `ERR unknown command '${args[0]!.toString('utf8').slice(0, 128)}', with args beginning with: ${list}`.replace(/[\r\n]/g, ' ');
  },
  transactionTooLarge: (limit: number) =>
    `ERR respool: transaction larger than the client query limit of ${limit} bytes`,
  cannotMerge: (command: string, why: string) =>
    `ERR respool: cannot merge the nodes' replies to ${command.toUpperCase()}: ${why}`,
  invalidCursor: () => `ERR invalid cursor`,
  unexpectedReply: (command: string) => `ERR respool: unexpected ${command} reply`,
  badClientName: () => `ERR Client names cannot contain spaces, newlines or special characters.`,
  unrecognizedOption: (option: string) => `ERR Unrecognized option '${option}'`,
  configSetFailed: (name: string, why: string) => `ERR CONFIG SET failed (possibly related to argument '${name}') - ${why}`,
  perNodeSetting: (verb: 'get' | 'set', name: string, why: string) =>
    `ERR respool: CONFIG ${verb.toUpperCase()} ${name} is not supported through respool: ${why}`,
  replicaKeyspace: () => `ERR Replica can't interact with the keyspace`,
  badClientAttr: (attr: string) => `ERR ${attr} cannot contain spaces, newlines or special characters.`,
  notLocal: (command: string) => `ERR respool: ${command} is not answered locally`,
  badProtocolVersion: () => `ERR Protocol version is not an integer or out of range`,
  helloSyntax: (option: string) => `ERR Syntax error in HELLO option '${option}'`,
  helloNoAuth: () =>
    `NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time`,
  hotKeysUnavailable: () => `ERR respool: hot keys are not available`,
  notAnInteger: () => `ERR value is not an integer or out of range`,
  respool: (message: string) => `ERR respool: ${message}`,
  queryBufferExceeded: (bytes: number, max: number) =>
    `ERR respool: query buffer of ${bytes} bytes exceeds the limit of ${max}`,
  monitorLost: (node: string, reason: string) => `ERR respool: MONITOR connection to ${node} closed (${reason})`,
  replicationStreamInvalid: (node: string, what: string) => `ERR respool: replication stream of ${node} is not valid: ${what}`,
  replicaStreamsExhausted: (max: number) =>
    `ERR respool: ${max} clients are already attached to the replication stream (dedicated.maxReplicaStreams)`,
  replicaStreamsOff: () => `ERR respool: SYNC and PSYNC are turned off (dedicated.maxReplicaStreams is 0)`,
  replicaStreamLost: (node: string, reason: string) => `ERR respool: replication stream of ${node} ended (${reason})`,
  unblockReason: () => `ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR`,
  // Valkey 8.0.1 networking.c clientCommand (LIST, KILL, PAUSE) and timeout.c, about respool's own clients.
  unknownClientType: (name: string) => `ERR Unknown client type '${name}'`,
  invalidClientId: () => `ERR Invalid client ID`,
  clientIdNotPositive: () => `ERR client-id should be greater than 0`,
  maxAgeNotInteger: () => `ERR maxage is not an integer or out of range`,
  maxAgeNotPositive: () => `ERR maxage should be greater than 0`,
  noSuchUser: (name: string) => `ERR No such user '${name}'`,
  noSuchClient: () => `ERR No such client`,
  subcommandSyntax: (command: string, sub: string) => `ERR unknown subcommand or wrong number of arguments for '${sub}'. Try ${command} HELP.`,
  countAtLeastMinusOne: () => `ERR count should be greater than or equal to -1`,
  commandlogType: () => `ERR type should be one of the following: slow, large-request, large-reply`,
  clientSubcommandSyntax: (sub: string) => `ERR unknown subcommand or wrong number of arguments for '${sub}'. Try CLIENT HELP.`,
  fleetKeysReserved: () => 'ERR respool: keys under the hash tag {respool-fleet} hold the fleet\'s shared state (split rules, users, members); clients may not use them',
  pauseMode: () => `ERR CLIENT PAUSE mode must be WRITE or ALL`,
  timeoutNotInteger: () => `ERR timeout is not an integer or out of range`,
  timeoutNegative: () => `ERR timeout is negative`,
  timeoutOutOfRange: () => `ERR timeout is out of range`,
  partFailed: (command: string, part: number, parts: number, slot: number, error: string, ran: number) =>
    `ERR respool: ${command.toUpperCase()} was split by slot into ${parts} parts; part ${part} (slot ${slot}) failed: ${error}; ${ran} of the other ${parts - 1} parts succeeded and were not undone`,
  notQueueable: (command: string, why: string) =>
    `ERR respool: ${command.replace('|', ' ').toUpperCase()} cannot be queued inside MULTI through respool (${why}); send it outside the transaction`,
  /** DBSIZE, FLUSHALL, FLUSHDB, RANDOMKEY queued by a user with a namespace (handlers/namespace-scope.ts). */
  notInNamespaceTransaction: (command: string) =>
    `ERR respool: ${command} of a user with a namespace (users[].keyPrefix) cannot run inside MULTI or after WATCH: the node would run it over every namespace's keys; send it outside the transaction`,
  migrateToSelf: () =>
    `ERR respool: MIGRATE to respool itself is not supported: the node would restore the keys onto itself through respool and then delete them; connect to a node directly`,
  /** CONFIG SET refused by a node after others applied it (handlers/config-set.ts); `unrestored`: "" when every other node was put back. */
  configSetRolledBack: (node: string, error: string, unrestored: string) =>
    `ERR respool: CONFIG SET failed on ${node} (${error}); ${unrestored === '' ? 'restored the previous values on the other nodes' : `could not restore the previous values on ${unrestored}`}`,
  // Users and permissions (src/acl/users.ts, handlers/acl.ts): Valkey 8.0.1's NOPERM (server.c processCommand) and ACL texts.
  noPerm: (message: string) => `NOPERM ${message}`,
  /** A restricted user's command that only the node can check (src/acl/command-check.ts needsNodeCheck), without an identity to run it as. */
  needsUpstreamIdentity: (command: string, user: string) =>
    `respool: ${command} can touch keys and run commands that are not in the request, which only the node can check, `
    + `and user ${user} has no upstream identity to run it as; give the user one: users[].upstream: mirror `
    + `(respool keeps a user with the same rules on the nodes), users[].upstream: {username, password} (a user you made on the nodes), or acl.upstream: mirror`,
  aclUnknownCategory: (name: string) => `ERR Unknown category '${name}'`,
  aclUserNotFound: (name: string) => `ERR User '${name}' not found`,
  aclCommandNotFound: (name: string) => `ERR Command '${name}' not found`,
  aclGenpassBits: () => `ERR ACL GENPASS argument must be the number of bits for the output password, a positive number up to 4096`,
} as const;
