// How respool treats each command. One decision per command, made from data (the tables
// below) and the command's Valkey metadata (flags, tips, key specs); cached per spec.
//
//   local      answered by respool itself (session state: ping, auth, hello, select, client setname, ...)
//   exclusive  needs a connection of its own (transactions, blocking, subscriptions, connection
//              state, node administration); not supported yet → the session replies with an error
//   allShards  must run on every shard (or every node) and have the replies merged
//   anyNode    keyless; any node answers for the whole data set (or the answer is per-node anyway)
//   keyed      route by the slot of the keys (CommandTable.keyIndexes); an empty key list
//              (e.g. EVAL with numkeys 0, malformed arguments) means "any node"
//
// Decision order (first match wins):
//   1. LOCAL_COMMANDS
//   2. EXCLUSIVE_COMMANDS (name → reason)
//   3. XREAD / XREADGROUP: exclusive only with the BLOCK option, otherwise keyed
//   4. the BLOCKING flag (BLPOP, BLMOVE, BZPOPMIN, WAIT, WAITAOF, ...) → exclusive
//   5. ALL_SHARDS_COMMANDS (explicit: SCAN, RANDOMKEY, PUBSUB SHARDCHANNELS/SHARDNUMSUB)
//   6. tip request_policy:all_shards or all_nodes → allShards, unless the tips also say
//      response_policy:special (INFO, FUNCTION STATS, MEMORY STATS/DOCTOR, LATENCY ...): those
//      replies cannot be merged generically, and one node's answer is what a user expects →
//      anyNode. all_nodes (replicas too: CONFIG SET, SCRIPT LOAD, ACL SETUSER) is reported as
//      allShards; the caller decides whether replicas are included (requestPolicy()).
//   7. the command can have keys (key specs / legacy range) → keyed
//   8. otherwise → anyNode

import { CommandFlag } from './command-flags.js';
import { commandMayHaveKeys, type CommandSpec } from './command-table.js';

export type ProxyHandling = 'local' | 'exclusive' | 'allShards' | 'anyNode' | 'keyed';

/** Commands respool answers itself (see src/session/local-commands.ts). */
export const LOCAL_COMMANDS: ReadonlySet<string> = new Set([
  'ping',
  'echo',
  'quit',
  'hello',
  'auth',
  'select',
  'reset',
  'client|setname',
  'client|getname',
  'client|id',
  'client|info',
  'client|setinfo',
]);

const TX = 'transactions (MULTI/EXEC/WATCH) need a dedicated upstream connection';
const SUB = 'subscriptions need a dedicated upstream connection';
const CONN = 'it changes or reports the state of one upstream connection, which respool shares between clients';
const ADMIN = 'it would act on the upstream connections respool shares between clients';
const NODE = 'node administration: connect to the node directly';
const REPL = 'the replication protocol needs a dedicated upstream connection';

/** Commands that need a connection of their own, with the reason (name → reason). */
export const EXCLUSIVE_COMMANDS: ReadonlyMap<string, string> = new Map([
  ['multi', TX],
  ['exec', TX],
  ['discard', TX],
  ['watch', TX],
  ['unwatch', TX],
  ['subscribe', SUB],
  ['psubscribe', SUB],
  ['ssubscribe', SUB],
  ['unsubscribe', SUB],
  ['punsubscribe', SUB],
  ['sunsubscribe', SUB],
  ['monitor', 'MONITOR streams every command of the node over a dedicated connection'],
  ['client|tracking', CONN],
  ['client|caching', CONN],
  ['client|getredir', CONN],
  ['client|trackinginfo', CONN],
  ['client|reply', CONN],
  ['client|no-evict', CONN],
  ['client|no-touch', CONN],
  ['client|capa', CONN],
  ['readonly', CONN],
  ['readwrite', CONN],
  ['asking', CONN],
  ['client|pause', ADMIN],
  ['client|unpause', ADMIN],
  ['client|kill', ADMIN],
  ['client|unblock', ADMIN],
  ['sync', REPL],
  ['psync', REPL],
  ['replconf', REPL],
  ['shutdown', NODE],
  ['failover', NODE],
  ['replicaof', NODE],
  ['slaveof', NODE],
  ['debug', NODE],
]);

const BLOCKING_REASON = 'blocking commands need a dedicated upstream connection';

/** Keyless commands that need every shard although their tips do not say so (or say "special"). */
export const ALL_SHARDS_COMMANDS: ReadonlySet<string> = new Set([
  'scan', // request_policy:special: a cluster-wide cursor
  'randomkey', // all_shards + response special: pick among the shards' answers
  'pubsub|shardchannels',
  'pubsub|shardnumsub',
]);

/** "all_shards" | "all_nodes" | "multi_shard" | "special" | undefined (from the tips). */
export function requestPolicy(spec: CommandSpec): string | undefined {
  return tipValue(spec, 'request_policy:');
}

/** "all_succeeded" | "one_succeeded" | "agg_sum" | "agg_min" | "agg_max" | "agg_logical_and" | "special" | ... */
export function responsePolicy(spec: CommandSpec): string | undefined {
  return tipValue(spec, 'response_policy:');
}

function tipValue(spec: CommandSpec, prefix: string): string | undefined {
  for (const t of spec.tips) if (t.startsWith(prefix)) return t.slice(prefix.length);
  return undefined;
}

interface Decision {
  readonly handling: ProxyHandling;
  readonly reason: string | undefined;
  /** Argument-dependent commands (XREAD/XREADGROUP). */
  readonly dynamic: boolean;
}

const cache = new WeakMap<CommandSpec, Decision>();

function decide(spec: CommandSpec): Decision {
  const name = spec.name;
  if (LOCAL_COMMANDS.has(name)) return { handling: 'local', reason: undefined, dynamic: false };
  const reason = EXCLUSIVE_COMMANDS.get(name);
  if (reason !== undefined) return { handling: 'exclusive', reason, dynamic: false };
  if (name === 'xread' || name === 'xreadgroup') return { handling: 'keyed', reason: undefined, dynamic: true };
  if (spec.flags & CommandFlag.BLOCKING) return { handling: 'exclusive', reason: BLOCKING_REASON, dynamic: false };
  if (ALL_SHARDS_COMMANDS.has(name)) return { handling: 'allShards', reason: undefined, dynamic: false };
  const req = requestPolicy(spec);
  if (req === 'all_shards' || req === 'all_nodes') {
    const handling = responsePolicy(spec) === 'special' ? 'anyNode' : 'allShards';
    return { handling, reason: undefined, dynamic: false };
  }
  if (commandMayHaveKeys(spec)) return { handling: 'keyed', reason: undefined, dynamic: false };
  return { handling: 'anyNode', reason: undefined, dynamic: false };
}

function decision(spec: CommandSpec): Decision {
  let d = cache.get(spec);
  if (d === undefined) {
    d = decide(spec);
    cache.set(spec, d);
  }
  return d;
}

const B_BLOCK = Buffer.from('block');
const B_COUNT = Buffer.from('count');
const B_GROUP = Buffer.from('group');
const B_STREAMS = Buffer.from('streams');

function eqLower(a: Buffer, lower: Buffer): boolean {
  if (a.length !== lower.length) return false;
  for (let i = 0; i < a.length; i++) {
    const c = a[i]!;
    if ((c >= 0x41 && c <= 0x5a ? c | 0x20 : c) !== lower[i]) return false;
  }
  return true;
}

/** XREAD [COUNT n] [BLOCK ms] STREAMS ... / XREADGROUP GROUP g c [COUNT n] [BLOCK ms] [NOACK] STREAMS ... */
function xreadBlocks(args: readonly Buffer[]): boolean {
  for (let i = 1; i < args.length; i++) {
    const a = args[i]!;
    if (eqLower(a, B_BLOCK)) return true;
    if (eqLower(a, B_STREAMS)) return false;
    if (eqLower(a, B_COUNT)) i += 1;
    else if (eqLower(a, B_GROUP)) i += 2;
    // NOACK and anything else: no argument
  }
  return false;
}

/** How respool handles this request (see the decision order at the top of this file). */
export function proxyHandling(spec: CommandSpec, args: readonly Buffer[]): ProxyHandling {
  const d = decision(spec);
  if (d.dynamic && xreadBlocks(args)) return 'exclusive';
  return d.handling;
}

/**
 * Why a request is 'exclusive' (a sentence without an error code, e.g. "blocking commands need a
 * dedicated upstream connection"); undefined for every other handling.
 */
export function exclusiveReason(spec: CommandSpec, args: readonly Buffer[]): string | undefined {
  const d = decision(spec);
  if (d.dynamic) return xreadBlocks(args) ? BLOCKING_REASON : undefined;
  return d.handling === 'exclusive' ? d.reason : undefined;
}
