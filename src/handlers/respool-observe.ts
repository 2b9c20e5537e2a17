import { encodeArray, encodeBulk, encodeCommand, encodeError, encodeInteger, encodeSimple } from '../resp/encode.js';
import { ProxyError } from '../errors.js';
import { arityError } from '../commands/command-table.js';
import type { ClusterNode } from '../cluster/topology.js';
import type { CommandLogEntry } from '../observe/command-log.js';
import type { LatencySummary } from '../metrics/latency-windows.js';
import type { CommandRequest, HandlerSession } from '../client/handler-session.js';

/**
 * RESPOOL SLOWLOG, RESPOOL LATENCY and RESPOOL NODE: what SLOWLOG and LATENCY cannot say in
 * Valkey's formats — where a slow request went and how its time split between respool and the
 * node, each node's and each command family's p50 / p99 / p99.9 over the last minute — and a
 * node's own logs, reached through respool (RESPOOL NODE <address> SLOWLOG GET).
 */
export const RESPOOL_OBSERVE_HELP = [
  'RESPOOL SLOWLOG [GET [count]|LEN|RESET] -- respool\'s slow log with each request\'s node and respool/node time split',
  'RESPOOL LATENCY                       -- p50/p99/p99.9 per node and per command family over the last minute',
  'RESPOOL NODE address command [arg ...] -- a node\'s own SLOWLOG, COMMANDLOG, LATENCY, INFO, … (introspection only)',
  'RESPOOL BIGKEYS [COUNT n]             -- the largest keys by reply size in the hot-key sampler\'s sample',
];

const fmt = (n: number) => n.toFixed(3);

/** True when `sub` (upper case) is one of these; the handler answers it. */
export function isObserveSubcommand(sub: string | undefined): sub is string {
  return sub === 'SLOWLOG' || sub === 'LATENCY' || sub === 'NODE' || sub === 'BIGKEYS';
}

export function respoolObserve(session: HandlerSession, req: CommandRequest, sub: string): void {
  if (sub === 'NODE') return nodeCommand(session, req);
  if (sub === 'BIGKEYS') return session.replyNow(bigKeys(session, req.args));
  session.replyNow(sub === 'SLOWLOG' ? slowlog(session, req.args) : latency(session));
}

/** RESPOOL BIGKEYS [COUNT n]: key, bytes (last read), max_bytes, samples, command, node. */
function bigKeys(session: HandlerSession, args: readonly Buffer[]): Buffer {
  const big = session.ctx.bigKeys;
  if (big === undefined || big === null) return encodeError(ProxyError.respool('big keys are off (bigKeys.enabled: false)'));
  let count = big.topK;
  if (args.length === 4 && args[2]!.toString('latin1').toUpperCase() === 'COUNT') {
    count = Number(args[3]!.toString('latin1'));
    if (!Number.isInteger(count) || count < 1) return encodeError(ProxyError.notAnInteger());
  } else if (args.length !== 2) {
    return encodeError(ProxyError.syntax());
  }
  const protocol = session.state.protocol;
  const b = (v: string) => encodeBulk(v, protocol);
  return encodeArray(big.top(count).map((k) => encodeArray([
    b('key'), b(k.key), b('bytes'), encodeInteger(k.bytes), b('max_bytes'), encodeInteger(k.maxBytes),
    b('samples'), encodeInteger(k.samples), b('command'), b(k.command), b('node'), b(k.node),
  ])));
}

function slowEntry(e: CommandLogEntry, protocol: 2 | 3): Buffer {
  const b = (v: string) => encodeBulk(v, protocol);
  return encodeArray([
    b('id'), encodeInteger(e.id),
    b('timestamp'), encodeInteger(e.time),
    b('duration_us'), encodeInteger(e.value),
    b('node'), b(e.node),
    b('node_us'), encodeInteger(e.nodeUs),
    b('respool_us'), encodeInteger(Math.max(0, e.value - e.nodeUs)),
    b('command'), encodeArray(e.args.map((a) => encodeBulk(a, protocol))),
    b('client'), b(e.client),
    b('client_name'), b(e.clientName),
  ]);
}

function slowlog(session: HandlerSession, args: readonly Buffer[]): Buffer {
  const observer = session.ctx.observer;
  if (observer === undefined) return encodeError(ProxyError.respool('the slow log is not kept here'));
  const log = observer.logs.slow;
  const op = args[2]?.toString('latin1').toUpperCase() ?? 'GET';
  if (op === 'LEN' && args.length === 3) return encodeInteger(log.length);
  if (op === 'RESET' && args.length === 3) {
    log.reset();
    return encodeSimple('OK');
  }
  if (op !== 'GET' || args.length > 4) return encodeError(ProxyError.syntax());
  let count = 10;
  if (args.length === 4) {
    count = Number(args[3]!.toString('latin1'));
    if (!Number.isInteger(count) || count < -1) return encodeError(ProxyError.countAtLeastMinusOne());
  }
  return encodeArray(log.newest(count).map((e) => slowEntry(e, session.state.protocol)));
}

function summaryReply(scope: string, s: LatencySummary, protocol: 2 | 3, extra: Buffer[] = []): Buffer {
  const b = (v: string) => encodeBulk(v, protocol);
  return encodeArray([
    b('scope'), b(scope), b('name'), b(s.name), b('calls'), encodeInteger(s.calls), b('per_second'), b(fmt(s.perSecond)),
    b('p50_us'), b(fmt(s.p50Us)), b('p99_us'), b(fmt(s.p99Us)), b('p999_us'), b(fmt(s.p999Us)), ...extra,
  ]);
}

/** Every node (upstream send → reply), then every command family (client receive → reply written), over the last minute. */
function latency(session: HandlerSession): Buffer {
  const metrics = session.ctx.metrics;
  if (metrics === undefined) return encodeError(ProxyError.respool('latency is not measured here'));
  const protocol = session.state.protocol;
  const saturation = session.ctx.saturation;
  const nodes = metrics.windows.nodeSummaries().map((s) => summaryReply('node', s, protocol, saturation === undefined ? [] : [
    encodeBulk('saturated', protocol), encodeInteger(saturation.isSaturated(s.name) ? 1 : 0),
  ]));
  const families = metrics.windows.familySummaries().map((s) => summaryReply('family', s, protocol));
  return encodeArray([...nodes, ...families]);
}

/**
 * Commands RESPOOL NODE sends a node: its own diagnostics, read-only but for resetting its logs.
 * Anything else would act on one node behind respool's back (writes, CONFIG SET, cluster admin).
 */
const NODE_COMMANDS: ReadonlySet<string> = new Set([
  'slowlog', 'commandlog', 'latency', 'info', 'memory', 'dbsize', 'ping', 'role', 'lastsave', 'time',
  'client|list', 'client|info', 'config|get', 'cluster|info', 'cluster|nodes', 'cluster|shards', 'cluster|myid',
  'command', 'function|stats', 'function|list', 'function|dump',
]);

function nodeCommand(session: HandlerSession, req: CommandRequest): void {
  const args = req.args;
  const arity = arityError({ name: 'respool|node', arity: -4 }, args.length);
  if (arity !== null) return session.replyNow(encodeError(arity));
  const address = args[2]!.toString('latin1');
  const name = args[3]!.toString('latin1').toLowerCase();
  const sub = args.length > 4 ? `${name}|${args[4]!.toString('latin1').toLowerCase()}` : name;
  if (!NODE_COMMANDS.has(name) && !NODE_COMMANDS.has(sub)) {
    return session.replyNow(encodeError(ProxyError.respool(`RESPOOL NODE sends a node only its introspection commands (SLOWLOG, COMMANDLOG, LATENCY, INFO, MEMORY, CLIENT LIST, CONFIG GET, …), not ${sub.replace('|', ' ').toUpperCase()}`)));
  }
  const topology = session.ctx.router.topology();
  const node: ClusterNode | undefined = topology?.allNodes().find((n) => n.address === address);
  if (node === undefined) return session.replyNow(encodeError(ProxyError.respool(`no node ${address} in the topology (RESPOOL LATENCY lists them)`)));
  const entry = session.reserve();
  const raw = encodeCommand(args.slice(3));
  session.ctx.router.send({ to: 'node', owner: entry, raw, command: sub, node, role: node.role === 'primary' ? 'primary' : 'replica' });
}
