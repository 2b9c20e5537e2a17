// How respool treats each command: the command's family, one handler per family in
// src/handlers/ (index.ts is the dispatch table). Decided from data (the tables below) and the
// command's Valkey metadata (flags, tips, key specs); cached per spec. This file only classifies.
//
//   local        answered by respool itself (session state: ping, auth, hello, select, client setname, ...)
//   info         INFO (but `INFO clients`, which is local): respool's own sections, the others
//                fetched from every primary and merged (handlers/info.ts)
//   transaction  MULTI, EXEC, DISCARD, WATCH, UNWATCH (handlers/transaction.ts)
//   cluster      CLUSTER SLOTS/SHARDS/NODES/INFO/MYID/… answered with respool's emulated cluster
//                (handlers/cluster.ts); COUNTKEYSINSLOT/GETKEYSINSLOT to the slot's owner
//   clients      CLIENT LIST / KILL / PAUSE / UNPAUSE about respool's own clients (handlers/client-commands.ts)
//   blocking     may block the connection: BLPOP, BLMOVE, BZPOPMIN, XREAD … BLOCK, ... (a leased connection)
//   pubsub       the SUBSCRIBE family (multiplexed over respool's own subscriber connections)
//   monitor      MONITOR: a leased connection to every node, their lines merged
//   replication  SYNC / PSYNC: the client becomes a replica of every primary (handlers/replication.ts)
//   tracking     CLIENT TRACKING / CACHING / GETREDIR / TRACKINGINFO (handlers/tracking.ts: leased
//                connections of the client's own, invalidations as RESP3 pushes)
//   script       EVAL/EVALSHA/FCALL (+ _RO): routed by their declared keys, never split; SCRIPT KILL
//                and FUNCTION KILL: to every primary on connections of their own
//   allShards    must run on every shard (or every node) and have the replies merged
//   anyNode      keyless; any node answers for the whole data set (or the answer is per-node anyway)
//   multiKey     MGET, MSET, DEL, UNLINK, EXISTS, TOUCH: split by slot when their keys span slots
//   keyed        route by the slot of the keys (CommandTable.keyIndexes); an empty key list
//                (malformed arguments) means "any node"
//   refused      cannot be offered through a shared proxy (connection state, node administration);
//                the client gets an error that names the command and the reason
//
// Decision order (first match wins):
//   1. LOCAL_COMMANDS, TRANSACTION_COMMANDS, PUBSUB_COMMANDS, SCRIPT_COMMANDS (with SCRIPT KILL, FUNCTION
//      KILL, FUNCTION STATS: they go where a script runs), MONITOR, TRACKING_COMMANDS,
//      CLUSTER_COMMANDS
//   2. REFUSED_COMMANDS (name → reason)
//   3. XREAD / XREADGROUP: blocking only with the BLOCK option, otherwise keyed;
//      INFO: local for `INFO clients` (respool's own clients), otherwise info
//   4. the BLOCKING flag (BLPOP, BLMOVE, BZPOPMIN, ...) → blocking
//   5. ALL_SHARDS_COMMANDS (explicit: SCAN, RANDOMKEY, PUBSUB SHARDCHANNELS/SHARDNUMSUB, SAVE,
//      BGSAVE, BGREWRITEAOF)
//   6. tip request_policy:all_shards or all_nodes → allShards, unless the tips also say
//      response_policy:special (INFO, FUNCTION STATS, MEMORY STATS/DOCTOR, LATENCY ...): those
//      replies cannot be merged generically, and one node's answer is what a user expects →
//      anyNode. all_nodes (replicas too: CONFIG SET, SCRIPT LOAD, ACL SETUSER) is reported as
//      allShards; the caller decides whether replicas are included (requestPolicy()).
//   7. the command can have keys (key specs / legacy range) → keyed
//   8. otherwise → anyNode

import { CommandFlag } from './command-flags.js';
import { commandMayHaveKeys, type CommandSpec } from './command-table.js';

export type CommandFamily =
  | 'local'
  | 'info'
  | 'transaction'
  | 'cluster'
  | 'clients'
  | 'blocking'
  | 'monitor'
  | 'replication'
  | 'tracking'
  | 'pubsub'
  | 'script'
  | 'allShards'
  | 'anyNode'
  | 'keyed'
  | 'multiKey'
  | 'refused';

/** Commands respool answers itself (handlers/local.ts). */
export const LOCAL_COMMANDS: ReadonlySet<string> = new Set([
  // ACL …: answered from respool's own users (handlers/acl.ts)
  'acl|whoami', 'acl|list', 'acl|users', 'acl|cat', 'acl|dryrun', 'acl|genpass', 'acl|help',
  'acl|setuser', 'acl|deluser', 'acl|getuser', 'acl|load', 'acl|save', 'acl|log',
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
  'readonly',
  'readwrite',
  'client|no-evict',
  'client|reply',
  'asking', // respool follows ASK itself (routing/router.ts); a client's ASKING has nothing to do
  // respool's own slow log, command log and latency histograms (handlers/observe.ts)
  'slowlog|get', 'slowlog|len', 'slowlog|reset', 'slowlog|help', 'latency|histogram',
  'commandlog|get', 'commandlog|len', 'commandlog|reset', 'commandlog|help',
]);

export const TRANSACTION_COMMANDS: ReadonlySet<string> = new Set(['multi', 'exec', 'discard', 'watch', 'unwatch']);

export const PUBSUB_COMMANDS: ReadonlySet<string> = new Set([
  'subscribe',
  'psubscribe',
  'ssubscribe',
  'unsubscribe',
  'punsubscribe',
  'sunsubscribe',
  'publish', // counts respool's subscribers as one server would (handlers/pubsub.ts)
  'pubsub|numsub',
  'pubsub|numpat',
  'pubsub|channels',
]);

/** The cluster emulation (handlers/cluster.ts): what a cluster-aware client asks to find the nodes. */
export const CLUSTER_COMMANDS: ReadonlySet<string> = new Set([
  'cluster|slots', 'cluster|shards', 'cluster|nodes', 'cluster|info', 'cluster|myid', 'cluster|myshardid',
  'cluster|keyslot', 'cluster|countkeysinslot', 'cluster|getkeysinslot', 'cluster|links',
  'cluster|replicas', 'cluster|slaves',
]);

/** Multi-key commands whose keys can be split by slot without changing their meaning (handlers/cross-slot/multi-key.ts). */
export const MULTI_KEY_COMMANDS: ReadonlySet<string> = new Set(['mget', 'mset', 'del', 'unlink', 'exists', 'touch']);

/** About respool's own clients (handlers/client-commands.ts). */
export const CLIENT_COMMANDS: ReadonlySet<string> = new Set(['client|list', 'client|kill', 'client|pause', 'client|unpause']);

/** Client-side caching (handlers/tracking.ts). */
export const TRACKING_COMMANDS: ReadonlySet<string> = new Set(['client|tracking', 'client|caching', 'client|getredir', 'client|trackinginfo']);

export const SCRIPT_COMMANDS: ReadonlySet<string> = new Set(['eval', 'evalsha', 'eval_ro', 'evalsha_ro', 'fcall', 'fcall_ro']);

const CONN = 'it changes or reports the state of one upstream connection, which respool shares between clients';
const NODE = 'node administration: connect to a node directly';
const REPL = 'respool answers SYNC and PSYNC itself; the rest of the replication protocol needs the node: connect to a node directly';

const CLUSTER_ADMIN = 'cluster administration: respool shows clients a cluster of its own; connect to a node directly';

/** Commands respool refuses, with the reason (name → reason). */
export const REFUSED_COMMANDS: ReadonlyMap<string, string> = new Map([
  ['client|no-touch', 'whether a command touches the keys it reads is a property of the upstream connection it runs on, which respool shares between clients'],
  ['client|capa', CONN],
  ['replconf', REPL],
  ['shutdown', NODE],
  ['failover', NODE],
  ['replicaof', NODE],
  ['slaveof', NODE],
  ['debug', NODE],
  ...[
    'meet', 'forget', 'addslots', 'addslotsrange', 'delslots', 'delslotsrange', 'flushslots', 'setslot', 'failover',
    'reset', 'replicate', 'saveconfig', 'bumpepoch', 'set-config-epoch', 'count-failure-reports',
  ].map((sub): [string, string] => [`cluster|${sub}`, CLUSTER_ADMIN]),
]);

/** Keyless commands that need every shard although their tips do not say so (or say "special"). */
export const ALL_SHARDS_COMMANDS: ReadonlySet<string> = new Set([
  'scan', // request_policy:special: a cluster-wide cursor
  'randomkey', // all_shards + response special: pick among the shards' answers
  'pubsub|shardchannels',
  'pubsub|shardnumsub',
  // One server saves all its data: through respool every primary saves its own (no tips say so).
  'save',
  'bgsave',
  'bgrewriteaof',
]);

/** Response policies for commands respool fans out without a tip saying how to merge them. */
const OWN_RESPONSE_POLICIES: ReadonlyMap<string, string> = new Map([
  ['save', 'all_succeeded'],
  ['bgsave', 'all_succeeded'],
  ['bgrewriteaof', 'all_succeeded'],
]);

/** "all_shards" | "all_nodes" | "multi_shard" | "special" | undefined (from the tips). */
export function requestPolicy(spec: CommandSpec): string | undefined {
  return tipValue(spec, 'request_policy:');
}

/** "all_succeeded" | "one_succeeded" | "agg_sum" | "agg_min" | "agg_max" | "agg_logical_and" | "special" | ... */
export function responsePolicy(spec: CommandSpec): string | undefined {
  return OWN_RESPONSE_POLICIES.get(spec.name) ?? tipValue(spec, 'response_policy:');
}

function tipValue(spec: CommandSpec, prefix: string): string | undefined {
  for (const t of spec.tips) if (t.startsWith(prefix)) return t.slice(prefix.length);
  return undefined;
}

interface Decision {
  readonly family: CommandFamily;
  readonly reason: string | undefined;
  /** Argument-dependent commands (XREAD/XREADGROUP). */
  readonly dynamic: boolean;
}

const cache = new WeakMap<CommandSpec, Decision>();

function decide(spec: CommandSpec): Decision {
  const name = spec.name;
  const of = (family: CommandFamily, reason?: string, dynamic = false): Decision => ({ family, reason, dynamic });
  if (LOCAL_COMMANDS.has(name)) return of('local');
  if (TRANSACTION_COMMANDS.has(name)) return of('transaction');
  if (PUBSUB_COMMANDS.has(name)) return of('pubsub');
  if (SCRIPT_COMMANDS.has(name) || name === 'script|kill' || name === 'function|kill' || name === 'function|stats') return of('script');
  if (MULTI_KEY_COMMANDS.has(name)) return of('multiKey');
  if (name === 'monitor') return of('monitor');
  if (name === 'sync' || name === 'psync') return of('replication');
  if (TRACKING_COMMANDS.has(name)) return of('tracking');
  if (CLUSTER_COMMANDS.has(name)) return of('cluster');
  if (CLIENT_COMMANDS.has(name)) return of('clients');
  if (name === 'client|unblock') return of('blocking'); // about blocked clients: blocking.ts owns it
  const reason = REFUSED_COMMANDS.get(name);
  if (reason !== undefined) return of('refused', reason);
  if (name === 'xread' || name === 'xreadgroup') return of('keyed', undefined, true);
  if (name === 'info') return of('info', undefined, true);
  // WAIT / WAITAOF block on the client's own shared links (handlers/wait.ts), not on a lease.
  if (name === 'wait' || name === 'waitaof') return of('allShards');
  if (spec.flags & CommandFlag.BLOCKING) return of('blocking');
  if (ALL_SHARDS_COMMANDS.has(name)) return of('allShards');
  const req = requestPolicy(spec);
  if (req === 'all_shards' || req === 'all_nodes') return of(responsePolicy(spec) === 'special' ? 'anyNode' : 'allShards');
  if (commandMayHaveKeys(spec)) return of('keyed');
  return of('anyNode');
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
const B_CLIENTS = Buffer.from('clients');

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

/** The family of this request (see the decision order at the top of this file). */
export function commandFamily(spec: CommandSpec, req: { readonly args: readonly Buffer[] }): CommandFamily {
  const d = decision(spec);
  if (d.dynamic) {
    const args = req.args; // only these read arguments (a request's views are made on first use)
    if (spec.name === 'info') return args.length === 2 && eqLower(args[1]!, B_CLIENTS) ? 'local' : d.family;
    if (xreadBlocks(args)) return 'blocking';
  }
  return d.family;
}

/** Why a request is refused (a sentence without an error code); undefined for every other family. */
export function refusalReason(spec: CommandSpec): string | undefined {
  return decision(spec).reason;
}
