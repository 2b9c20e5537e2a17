import { decodeReply, RespError, type RespValue } from '../resp/decode.js';
import { encodeBulk, encodeError, encodeMap, encodeSimple } from '../resp/encode.js';
import { ProxyError } from '../errors.js';
import { globMatch } from '../util/glob.js';
import type { CallOwner } from '../routing/upstream-call.js';
import type { CommandRequest, HandlerSession } from '../client/handler-session.js';

/**
 * CONFIG settings that are respool's, not the nodes':
 *
 *   per node   a node's addresses, files, identity in the cluster. Sent to every node, a CONFIG SET
 *              of one applies on one node at best (two nodes cannot listen on one port) and is
 *              half-applied; a CONFIG GET shows one node's value as the upstream's. respool answers
 *              those it has a counterpart of with its own (listen port and host, TLS port, zone) and
 *              refuses the others, naming the setting and why; a CONFIG SET of any is refused
 *              before anything is sent.
 *   logs       SLOWLOG, COMMANDLOG and LATENCY HISTOGRAM are respool's own (handlers/observe.ts),
 *              so their settings are too: slowlog-*, commandlog-* (Valkey 8.1's names) and
 *              latency-tracking are read and set on respool (slowlog.*, commandlog.*,
 *              latency.tracking), with Valkey's ranges and errors; a node's own with RESPOOL NODE.
 *   tracking   tracking-table-max-keys bounds respool's tracking table (client/tracked-keys.ts):
 *              each node's bounds only its part of the keys.
 *              A CONFIG SET mixing them with node settings is refused (it could not be all or
 *              nothing).
 *
 * CONFIG GET of a pattern (`*`, `*port`): the node's answer without these, plus respool's own that
 * the pattern matches. Other settings are untouched (config-set.ts, the plain forward).
 */
const RESPOOL_OWN: ReadonlyMap<string, (session: HandlerSession) => string> = new Map([
  ['port', (s: HandlerSession) => s.localAddress.slice(s.localAddress.lastIndexOf(':') + 1)],
  ['bind', (s: HandlerSession) => s.ctx.config.listen?.host ?? s.ctx.config.unixSocket ?? ''],
  ['tls-port', (s: HandlerSession) => String(s.ctx.config.listenTls?.port ?? 0)],
  ['availability-zone', (s: HandlerSession) => s.ctx.facts?.zone() ?? ''],
  // respool is a primary to its clients (it shows itself so in INFO replication and CLUSTER NODES)
  ['replicaof', () => ''],
  ['slaveof', () => ''],
]);

/** Valkey 8.0.1's per-node parameters (config.c) that respool has no counterpart of, aliases included. */
const PER_NODE: ReadonlySet<string> = new Set([
  'unixsocket', 'unixsocketgroup', 'unixsocketperm', 'pidfile', 'logfile', 'req-res-logfile', 'syslog-ident', 'dir',
  'dbfilename', 'appendfilename', 'appenddirname', 'bind-source-addr', 'socket-mark-id',
  'cluster-config-file', 'cluster-port', 'cluster-announce-ip', 'cluster-announce-port', 'cluster-announce-tls-port',
  'cluster-announce-bus-port', 'cluster-announce-hostname', 'cluster-announce-human-nodename',
  'cluster-announce-client-ipv4', 'cluster-announce-client-ipv6',
  'replica-announce-ip', 'slave-announce-ip', 'replica-announce-port', 'slave-announce-port',
  // The nodes' own credentials: requirepass is respool's upstreamAuth password (no secret leaves
  // respool), and changing one through respool would lock respool out of the nodes.
  'requirepass', 'masterauth', 'primaryauth', 'masteruser', 'primaryuser', 'tls-key-file-pass', 'tls-client-key-file-pass',
]);

/** A setting of respool's own logs: its value now, and how a CONFIG SET value applies (or Valkey's reason it does not). */
interface LogSetting {
  get(session: HandlerSession): string;
  set(session: HandlerSession, value: string): string | (() => void);
}

/** Valkey's createLongLongConfig / createULongConfig parse and range check, as CONFIG SET reports it. */
function integerSetting(min: number, max: number, read: (s: HandlerSession) => number, write: (s: HandlerSession, v: number) => void): LogSetting {
  return {
    get: (s) => String(read(s)),
    set: (s, value) => {
      if (!/^-?\d+$/.test(value) || !Number.isSafeInteger(Number(value))) return "argument couldn't be parsed into an integer";
      const v = Number(value);
      if (v < min || v > max) return `argument must be between ${min} and ${max} inclusive`;
      return () => write(s, v);
    },
  };
}

const MAX_LOG_LEN = 1_000_000; // respool's bound on a log's length (slowlog.maxLen's)
const slowThreshold = integerSetting(-1, Number.MAX_SAFE_INTEGER, (s) => s.ctx.config.slowlog.thresholdUs, (s, v) => (s.ctx.config.slowlog.thresholdUs = v));
const slowMaxLen = integerSetting(0, MAX_LOG_LEN, (s) => s.ctx.config.slowlog.maxLen, (s, v) => (s.ctx.config.slowlog.maxLen = v));

const LOG_SETTINGS: ReadonlyMap<string, LogSetting> = new Map([
  ['slowlog-log-slower-than', slowThreshold],
  ['slowlog-max-len', slowMaxLen],
  ['commandlog-execution-slower-than', slowThreshold],
  ['commandlog-slow-execution-max-len', slowMaxLen],
  ['commandlog-request-larger-than', integerSetting(-1, Number.MAX_SAFE_INTEGER, (s) => s.ctx.config.commandlog.largeRequestBytes, (s, v) => (s.ctx.config.commandlog.largeRequestBytes = v))],
  ['commandlog-large-request-max-len', integerSetting(0, MAX_LOG_LEN, (s) => s.ctx.config.commandlog.largeRequestMaxLen, (s, v) => (s.ctx.config.commandlog.largeRequestMaxLen = v))],
  ['commandlog-reply-larger-than', integerSetting(-1, Number.MAX_SAFE_INTEGER, (s) => s.ctx.config.commandlog.largeReplyBytes, (s, v) => (s.ctx.config.commandlog.largeReplyBytes = v))],
  ['commandlog-large-reply-max-len', integerSetting(0, MAX_LOG_LEN, (s) => s.ctx.config.commandlog.largeReplyMaxLen, (s, v) => (s.ctx.config.commandlog.largeReplyMaxLen = v))],
  // respool's tracking table (client/tracked-keys.ts): the nodes' tables are each a part of it.
  ['tracking-table-max-keys', integerSetting(0, Number.MAX_SAFE_INTEGER, (s) => s.ctx.trackedKeys?.maxKeys ?? 0, (s, v) => s.ctx.trackedKeys?.setMaxKeys(v))],
  ['latency-tracking', {
    get: (s) => ((s.ctx.observer?.commands.enabled ?? s.ctx.config.latency.tracking) ? 'yes' : 'no'),
    set: (s, value) => {
      const v = value.toLowerCase();
      if (v !== 'yes' && v !== 'no') return "argument must be 'yes' or 'no'";
      return () => {
        if (s.ctx.observer !== undefined) s.ctx.observer.commands.enabled = v === 'yes';
      };
    },
  }],
]);

/** Settings answered by respool: getters by name. */
function ownGetter(name: string): ((s: HandlerSession) => string) | undefined {
  return RESPOOL_OWN.get(name) ?? LOG_SETTINGS.get(name)?.get;
}

const OWN_NAMES = [...RESPOOL_OWN.keys(), ...LOG_SETTINGS.keys()];
const ALL_PER_NODE = [...OWN_NAMES, ...PER_NODE];

const WHY_GET = 'it is a setting of each node (connect to one, or ask it with RESPOOL NODE <address> CONFIG GET)';
const WHY_SET = 'it is a setting of each node: connect to a node directly to change it';
const WHY_OWN = 'it is respool\'s own (its listen address, TLS port, zone, role): set it in respool\'s configuration';

const isPattern = (name: string) => /[*?[\\]/.test(name);
const matches = (pattern: string, name: string) => globMatch(Buffer.from(pattern), Buffer.from(name));

/**
 * CONFIG SET: the reply when respool answers it — a per-node setting refused, respool's own log
 * settings applied (all or none: every value is checked first), a mix refused — or null when it
 * names node settings only and goes its usual way. A setting of respool's own set to the value it
 * has is a no-op (+OK), as on Valkey; a per-node one is `unchanged` when every node has that value
 * already (the caller asks them: setWhereUnchanged), refused otherwise.
 */
export function configSetHere(session: HandlerSession, args: readonly Buffer[]): Buffer | { perNode: Array<[string, Buffer]> } | null {
  if (args.length < 4 || args.length % 2 !== 0) return null; // Valkey's arity / syntax errors, from the node
  const own: Array<() => void> = [];
  const perNode: Array<[string, Buffer]> = [];
  let others = 0;
  for (let i = 2; i < args.length; i += 2) {
    const name = args[i]!.toString('latin1').toLowerCase();
    const ownValue = RESPOOL_OWN.get(name);
    if (ownValue !== undefined) {
      if (args[i + 1]!.toString('latin1') !== ownValue(session)) return encodeError(ProxyError.perNodeSetting('set', name, WHY_OWN));
      own.push(() => {}); // its value already: nothing changes
      continue;
    }
    if (PER_NODE.has(name)) {
      perNode.push([name, args[i + 1]!]);
      continue;
    }
    const setting = LOG_SETTINGS.get(name);
    if (setting === undefined) {
      others++;
      continue;
    }
    const outcome = setting.set(session, args[i + 1]!.toString('latin1'));
    if (typeof outcome === 'string') return encodeError(ProxyError.configSetFailed(args[i]!.toString('latin1'), outcome));
    own.push(outcome);
  }
  if (perNode.length > 0) {
    if (own.length > 0 || others > 0) return encodeError(ProxyError.perNodeSetting('set', perNode[0]![0], WHY_SET));
    return { perNode };
  }
  if (own.length === 0) return null;
  if (others > 0) return encodeError(ProxyError.respool(`CONFIG SET of respool's own settings (slowlog-*, commandlog-*, latency-tracking, tracking-table-max-keys) cannot be mixed with the nodes' settings: send them in a CONFIG SET of their own`));
  for (const apply of own) apply();
  return encodeSimple('OK');
}

/**
 * A CONFIG SET of per-node settings only: +OK when every node has each value already (nothing is
 * sent: setting a node's file, address or credential to what it is changes nothing, as on
 * Valkey), else the refusal naming the first that would change. `get`: CONFIG GET name on every
 * node, each reply.
 */
export async function setWhereUnchanged(pairs: ReadonlyArray<[string, Buffer]>, get: (name: string) => Promise<Buffer[]>): Promise<Buffer> {
  for (const [name, value] of pairs) {
    const replies = await get(name);
    const same = replies.length > 0 && replies.every((reply) => {
      const v = decodeReply(reply);
      const pair = v instanceof Map ? [...v.entries()].flat() : Array.isArray(v) ? v : [];
      return pair.length === 2 && Buffer.isBuffer(pair[1]) && (pair[1] as Buffer).equals(value);
    });
    if (!same) return encodeError(ProxyError.perNodeSetting('set', name, WHY_SET));
  }
  return encodeSimple('OK');
}

/**
 * CONFIG GET: true when this module answered it (a refusal, or the node's reply rewritten);
 * false when no per-node setting is involved and the caller forwards it as it is.
 */
export function configGet(session: HandlerSession, req: CommandRequest, forward: (owner: CallOwner) => Buffer | null): boolean {
  if (req.args.length < 3) return false;
  const asked = req.args.slice(2).map((a) => a.toString('latin1'));
  const patterns = asked.map((a) => a.toLowerCase());
  let touches = false;
  for (const p of patterns) {
    if (!isPattern(p)) {
      if (PER_NODE.has(p)) {
        session.replyNow(encodeError(ProxyError.perNodeSetting('get', p, WHY_GET)));
        return true;
      }
      if (ownGetter(p) !== undefined) touches = true;
    } else if (ALL_PER_NODE.some((name) => matches(p, name))) {
      touches = true;
    }
  }
  if (!touches) return false;
  // Named exactly, a setting comes back spelt as asked (Valkey does so); matched by a pattern, as Valkey names it.
  const own: Array<[string, string]> = [];
  for (const name of OWN_NAMES) {
    const value = ownGetter(name)!;
    const exact = patterns.findIndex((p) => p === name);
    if (exact >= 0) own.push([asked[exact]!, value(session)]);
    else if (patterns.some((p) => isPattern(p) && matches(p, name))) own.push([name, value(session)]);
  }
  const entry = session.reserve();
  const protocol = session.state.protocol;
  const owner: CallOwner = { client: entry.client, onCallDone: (reply) => entry.fill(withOwnSettings(reply, own, protocol)) };
  const error = forward(owner);
  if (error !== null) entry.fill(error);
  return true;
}

/** A node's CONFIG GET reply without per-node settings, with respool's own values added. */
function withOwnSettings(reply: Buffer, own: ReadonlyArray<[string, string]>, protocol: 2 | 3): Buffer {
  let value: RespValue;
  try {
    value = decodeReply(reply);
  } catch {
    return Buffer.from(reply);
  }
  if (value instanceof RespError) return Buffer.from(reply);
  const pairs: Array<[string, RespValue]> = [];
  if (value instanceof Map) for (const [k, v] of value) pairs.push([String(k), v]);
  else if (Array.isArray(value)) for (let i = 0; i + 1 < value.length; i += 2) pairs.push([String(value[i]), value[i + 1]!]);
  else return Buffer.from(reply);
  const kept = pairs.filter(([k]) => ownGetter(k.toLowerCase()) === undefined && !PER_NODE.has(k.toLowerCase()));
  const entries: Array<[Buffer, Buffer]> = [...kept.map(([k, v]): [string, string] => [k, Buffer.isBuffer(v) ? v.toString('latin1') : String(v)]), ...own]
    .map(([k, v]) => [encodeBulk(k, protocol), encodeBulk(Buffer.from(v, 'latin1'), protocol)]);
  return encodeMap(entries, protocol);
}
