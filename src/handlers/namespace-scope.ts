import { nodeCrypto } from '../util/lazy-builtins.js';
import type { TrackingLanes } from '../client/tracking-lanes.js';
import type { CommandRequest, HandlerSession } from '../client/handler-session.js';
import { ProxyError } from '../errors.js';
import { bulkPayload } from '../resp/decode.js';
import { encodeBulk, encodeCommand, encodeError, encodeInteger } from '../resp/encode.js';
import { asRespoolClient, nodeCall } from '../routing/internal-call.js';
import { scanNode } from '../routing/node-scan.js';
import type { CallClient } from '../routing/upstream-call.js';
import type { ClusterNode } from '../cluster/topology.js';
import type { KeyNames } from '../keys/key-names.js';
import { namespaceFunctions } from './namespace-functions.js';
import { queueApart } from './transaction.js';

/** The commands that speak for the whole keyspace, answered for a namespace's keys only. */
export const NAMESPACE_SCOPED: ReadonlySet<string> = new Set(['dbsize', 'flushall', 'flushdb', 'randomkey', 'function|flush', 'function|dump', 'function|restore']);

/** RANDOMKEY: the nodes' own picks tried before the namespace is scanned for one. */
const RANDOM_TRIES = 4;

/**
 * DBSIZE, FLUSHALL, FLUSHDB and RANDOMKEY of a user with a namespace (users[].keyPrefix,
 * keys/key-names.ts), as one server holding only that namespace would answer them:
 *
 *   DBSIZE            the namespace's keys, counted by SCAN MATCH <namespace>* on every primary
 *   FLUSHALL/FLUSHDB  those keys removed (UNLINK; DEL for SYNC), batch by batch; +OK once every
 *                     primary's scan is done — so the reply says the namespace is empty (keys
 *                     written meanwhile by others may remain, as after Valkey's ASYNC flush)
 *   RANDOMKEY         a node's RANDOMKEY when it lands in the namespace (a few tries), else one of
 *                     the namespace's keys found by scanning; nil when it has none
 *   FUNCTION FLUSH / DUMP / RESTORE  the namespace's function libraries only (namespace-functions.ts)
 *
 * Inside MULTI they are queued and run at EXEC in their place, apart from the transaction's
 * block (handlers/transaction-apart.ts): queued, the node would run them over every
 * application's keys. On a WATCH lane they are refused, for the same reason.
 */
export function namespaceScoped(session: HandlerSession, req: CommandRequest, names: KeyNames): void {
  const state = session.state;
  if (state.lane !== null) {
    if (state.transaction !== null) state.transaction.dirty = true;
    state.refusedNow = true;
    return session.replyNow(encodeError(ProxyError.notInNamespaceTransaction(req.command.toUpperCase())));
  }
  const arity = badArguments(req);
  if (arity !== null) {
    if (state.transaction !== null) state.transaction.dirty = true; // EXEC aborts, as Valkey's queue-time error makes it
    return session.replyNow(encodeError(arity));
  }
  if (state.transaction !== null) {
    const kept: CommandRequest = { args: req.args.map((a) => Buffer.from(a)), raw: Buffer.from(req.raw), spec: req.spec, command: req.command };
    return queueApart(session, kept, (caller) => namespaceScopedReply(session, caller, kept, names));
  }
  session.runExclusive(() => {
    const entry = session.reserve();
    void namespaceScopedReply(session, entry.client, req, names).then((reply) => entry.fill(reply));
  });
}

/** What a namespace-scoped command answers (see namespaceScoped), for `caller`; never rejects (an error reply instead). */
export function namespaceScopedReply(session: HandlerSession, caller: CallClient, req: CommandRequest, names: KeyNames): Promise<Buffer> {
  const client = asRespoolClient(caller);
  const primaries = (session.ctx.router.topology()?.shards ?? []).map((s) => s.primary);
  const pattern = names.scopePattern;
  let work: Promise<Buffer>;
  if (req.command === 'dbsize') work = countKeys(session, client, primaries, pattern);
  else if (req.command === 'randomkey') work = randomKey(session, client, primaries, names, pattern);
  else if (req.command.startsWith('function|')) work = namespaceFunctions(session, client, primaries, names.functions!, req);
  else work = removeKeys(session, client, primaries, pattern, isSync(req));
  return work.catch((e: Error) => encodeError(`ERR respool: ${e.message}`));
}

/** Valkey's argument error for FLUSHALL/FLUSHDB/FUNCTION FLUSH (ASYNC or SYNC; the arity was checked at admission). */
function badArguments(req: CommandRequest): string | null {
  if (req.command === 'function|dump' || req.command === 'function|restore') return null; // arity checked; RESTORE's policy there
  const at = req.command === 'function|flush' ? 2 : 1;
  if (req.args.length === at) return null;
  if (at === 2 && req.args.length > 3) return `ERR unknown subcommand or wrong number of arguments for '${req.args[1]!.toString('utf8')}'. Try FUNCTION HELP.`;
  const word = req.args[at]!.toString('latin1').toLowerCase();
  if (req.args.length === at + 1 && (word === 'async' || word === 'sync')) return null;
  return at === 2 ? 'ERR FUNCTION FLUSH only supports SYNC|ASYNC option' : 'ERR syntax error';
}

function isSync(req: CommandRequest): boolean {
  return req.args.length === 2 && req.args[1]!.toString('latin1').toLowerCase() === 'sync';
}

async function countKeys(session: HandlerSession, client: CallClient, primaries: ClusterNode[], pattern: Buffer): Promise<Buffer> {
  let count = 0;
  await Promise.all(primaries.map((node) => scanNode(session.ctx.router, client, node, pattern, (keys) => {
    count += keys.length;
  })));
  return encodeInteger(count);
}

async function removeKeys(session: HandlerSession, client: CallClient, primaries: ClusterNode[], pattern: Buffer, sync: boolean): Promise<Buffer> {
  // The namespace's tracking clients get one "invalidate everything", as from one server's
  // flush, not one invalidation per key removed (client/tracking-lanes.ts beginFlush).
  const trackers = namespaceTrackers(session.ctx.sessions(), pattern);
  for (const lanes of trackers) lanes.beginFlush();
  // Those on the other workers and fleet members too, before a key goes (a node's invalidation of one would reach them first).
  const peers = session.ctx.namespaceFlushPeers;
  const flushId = `${process.pid}:${++flushes}:${nodeCrypto().randomBytes(4).toString('hex')}`; // unique across a fleet's hosts too
  await peers?.begin(flushId, pattern);
  try {
    await Promise.all(primaries.map((node) => scanNode(session.ctx.router, client, node, pattern, async (keys) => {
      // One key per command: the keys of one step are in many slots, and a node takes one slot per command.
      const removals = keys.map((key) => nodeCall(session.ctx.router, client, node, 'primary', encodeCommand([sync ? 'DEL' : 'UNLINK', key]), sync ? 'del' : 'unlink'));
      for (const reply of await Promise.all(removals)) if (reply[0] === 0x2d) throw new Error(reply.toString('latin1', 1).trim());
    })));
  } finally {
    void peers?.end(flushId);
    await Promise.all(trackers.map((lanes) => lanes.endFlush()));
  }
  return Buffer.from('+OK\r\n');
}

let flushes = 0;
/** Another worker's (or fleet member's) namespace flush: this process's tracking clients of the namespace, between its begin and its end. */
const peerFlushes = new Map<string, TrackingLanes[]>();

/** Another worker or member begins flushing the namespace `pattern`: this process's tracking clients of it stop passing on per-key invalidations. */
export function beginPeerFlush(sessions: Iterable<HandlerSession>, id: string, pattern: Buffer): void {
  const trackers = namespaceTrackers(sessions, pattern);
  for (const lanes of trackers) lanes.beginFlush();
  peerFlushes.set(id, trackers);
  // A flusher that died sends no end: these clients' invalidations are not held back for ever.
  setTimeout(() => void endPeerFlush(id), PEER_FLUSH_MAX_MS).unref();
}

/** The longest another process's flush holds back this process's clients' per-key invalidations. */
const PEER_FLUSH_MAX_MS = 120_000;

/** That flush ended: each of them gets one "invalidate everything". */
export async function endPeerFlush(id: string): Promise<void> {
  const trackers = peerFlushes.get(id) ?? [];
  peerFlushes.delete(id);
  await Promise.all(trackers.map((lanes) => lanes.endFlush()));
}

/** The tracking clients whose namespace is `pattern`'s. */
function namespaceTrackers(sessions: Iterable<HandlerSession>, pattern: Buffer): TrackingLanes[] {
  const trackers: TrackingLanes[] = [];
  for (const other of sessions) {
    const lanes = other.state.tracking;
    if (lanes !== null && other.state.acl.keyNames?.scopePattern.equals(pattern) === true) trackers.push(lanes);
  }
  return trackers;
}

async function randomKey(session: HandlerSession, client: CallClient, primaries: ClusterNode[], names: KeyNames, pattern: Buffer): Promise<Buffer> {
  if (primaries.length === 0) return encodeBulk(null, client.protocol);
  for (let i = 0; i < RANDOM_TRIES; i++) {
    const node = primaries[Math.floor(Math.random() * primaries.length)]!;
    const stored = bulkPayload(await nodeCall(session.ctx.router, client, node, 'primary', encodeCommand(['RANDOMKEY']), 'randomkey'));
    const name = stored === null ? null : names.visibleName(stored);
    if (name !== null) return encodeBulk(name, client.protocol);
  }
  const found: Buffer[] = []; // the client's names
  await Promise.all(primaries.map((node) => scanNode(session.ctx.router, client, node, pattern, (keys) => {
    for (const key of keys) {
      const name = names.visibleName(key);
      if (name !== null) found.push(name);
    }
  })));
  return encodeBulk(found.length === 0 ? null : found[Math.floor(Math.random() * found.length)]!, client.protocol);
}
