import { decodeReply, RespError, type RespValue } from '../resp/decode.js';
import { encodeBulk, encodeError, encodeMap } from '../resp/encode.js';
import { ProxyError } from '../errors.js';
import { globMatch } from '../util/glob.js';
import type { CallOwner } from '../routing/upstream-call.js';
import type { CommandRequest, HandlerSession } from './types.js';

/**
 * CONFIG settings that belong to one node by nature — its addresses, its files, its identity in
 * the cluster. Sent to every node, a CONFIG SET of one applies on one node at best (two nodes
 * cannot listen on one port) and is half-applied; a CONFIG GET shows one node's value as if it
 * were the whole upstream's. So respool answers those it has a counterpart of with its own value
 * (its listen port and host, its TLS port, its availability zone) and refuses the others, naming
 * the setting and why; CONFIG SET of any of them is refused before anything is sent.
 *
 * CONFIG GET of a pattern (`*`, `*port`): the node's answer without the per-node settings, plus
 * respool's own that the pattern matches. CONFIG GET naming one exactly: respool's own, or the
 * refusal. Other settings are untouched (config-set.ts, the plain forward).
 */
const RESPOOL_OWN: ReadonlyMap<string, (session: HandlerSession) => string> = new Map([
  ['port', (s: HandlerSession) => s.localAddress.slice(s.localAddress.lastIndexOf(':') + 1)],
  ['bind', (s: HandlerSession) => s.ctx.config.listen.host],
  ['tls-port', (s: HandlerSession) => String(s.ctx.config.listenTls?.port ?? 0)],
  ['availability-zone', (s: HandlerSession) => s.ctx.facts?.zone() ?? ''],
]);

/** Valkey 8.0.1's per-node parameters (config.c) that respool has no counterpart of, aliases included. */
const PER_NODE: ReadonlySet<string> = new Set([
  'unixsocket', 'unixsocketgroup', 'unixsocketperm', 'pidfile', 'logfile', 'req-res-logfile', 'syslog-ident', 'dir',
  'dbfilename', 'appendfilename', 'appenddirname', 'bind-source-addr', 'socket-mark-id',
  'cluster-config-file', 'cluster-port', 'cluster-announce-ip', 'cluster-announce-port', 'cluster-announce-tls-port',
  'cluster-announce-bus-port', 'cluster-announce-hostname', 'cluster-announce-human-nodename',
  'cluster-announce-client-ipv4', 'cluster-announce-client-ipv6',
  'replica-announce-ip', 'slave-announce-ip', 'replica-announce-port', 'slave-announce-port', 'replicaof', 'slaveof',
]);

const ALL_PER_NODE = [...RESPOOL_OWN.keys(), ...PER_NODE];

const WHY_GET = 'it is a setting of each node (connect to one, or ask it with RESPOOL NODE <address> CONFIG GET)';
const WHY_SET = 'it is a setting of each node: connect to a node directly to change it';
const WHY_OWN = 'it is respool\'s own (its listen address, TLS port, zone): set it in respool\'s configuration';

const isPattern = (name: string) => /[*?[\\]/.test(name);
const matches = (pattern: string, name: string) => globMatch(Buffer.from(pattern), Buffer.from(name));

/**
 * CONFIG SET naming a per-node setting: the refusal (nothing is sent to any node); null for the
 * others, which go their usual way.
 */
export function perNodeSetRefusal(args: readonly Buffer[]): Buffer | null {
  for (let i = 2; i < args.length; i += 2) {
    const name = args[i]!.toString('latin1').toLowerCase();
    if (RESPOOL_OWN.has(name)) return encodeError(ProxyError.perNodeSetting('set', name, WHY_OWN));
    if (PER_NODE.has(name)) return encodeError(ProxyError.perNodeSetting('set', name, WHY_SET));
  }
  return null;
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
      if (RESPOOL_OWN.has(p)) touches = true;
    } else if (ALL_PER_NODE.some((name) => matches(p, name))) {
      touches = true;
    }
  }
  if (!touches) return false;
  // Named exactly, a setting comes back spelt as asked (Valkey does so); matched by a pattern, as Valkey names it.
  const own: Array<[string, string]> = [];
  for (const [name, value] of RESPOOL_OWN) {
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
  const kept = pairs.filter(([k]) => !RESPOOL_OWN.has(k.toLowerCase()) && !PER_NODE.has(k.toLowerCase()));
  const entries: Array<[Buffer, Buffer]> = [...kept.map(([k, v]): [string, string] => [k, Buffer.isBuffer(v) ? v.toString('latin1') : String(v)]), ...own]
    .map(([k, v]) => [encodeBulk(k, protocol), encodeBulk(Buffer.from(v, 'latin1'), protocol)]);
  return encodeMap(entries, protocol);
}
