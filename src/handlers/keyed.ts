import calculateSlot from 'cluster-key-slot';
import { asRespoolClient, internalCall } from '../routing/internal-call.js';
import { latencyEvents } from './latency-events.js';
import { encodeError, encodeSimple } from '../resp/encode.js';
import { ProxyError } from '../errors.js';
import { crossSlotKeyed } from './cross-slot/dispatch.js';
import type { CommandRequest, Handler, HandlerSession } from '../client/handler-session.js';
import { configGet } from './node-settings.js';
import { needsNodeCheck } from '../acl/command-check.js';
import { UpstreamCall, type CallFactory, type CallOwner } from '../routing/upstream-call.js';
import { CommandFlag } from '../commands/command-flags.js';
import type { ReplyEntry } from '../client/reply-queue.js';
import { cachedRead, coalescedRead } from './near-cache.js';

/**
 * Keyed and keyless commands for one node: the router picks the node (slot owner, read strategy,
 * any primary) and the call completes the entry. Keys in different slots: cross-slot/dispatch.ts, else
 * CROSSSLOT.
 */
export const keyed: Handler = (session, req) => {
  if (req.command === 'migrate' && req.args.length >= 3 && migratesToRespool(session, req.args[1]!, req.args[2]!)) return migrateToSelf(session, req);
  const parkedKeys = feedsParked(session, req);
  if (parkedKeys === null) return route(session, req, null);
  // A write to keys parked clients wait on: a barrier, and its reply held until those clients are
  // served (parking/parked-pops.ts, afterServing) — as Valkey serves its blocked clients before
  // it answers the command that fed them, and before the writer's next command runs.
  const kept: CommandRequest = { args: req.args.map((a) => Buffer.from(a)), raw: Buffer.from(req.raw), spec: req.spec, command: req.command };
  session.runExclusive(() => route(session, kept, parkedKeys.map((k) => Buffer.from(k))));
};

function route(session: HandlerSession, req: CommandRequest, parkedKeys: Buffer[] | null): void {
  const entry = session.reserve();
  const ctx = session.ctx;
  // SWAPDB moves keys between databases without an invalidation to tracking clients: once it ran,
  // parked clients' keys are tried again (as Valkey's SWAPDB wakes its blocked clients).
  if (req.command === 'swapdb') entry.measureReply(() => ctx.parking.everythingChanged());
  if (parkedKeys === null && cachedRead(session, req, entry, (kept) => sendOn(session, kept, entry))) return; // answered from respool's memory, or by one fill (near-cache.ts)
  const reader = parkedKeys === null ? coalescedRead(session, req, entry) : entry; // a twin's reply (nearCache.coalesceAll)
  if (reader === null) return;
  const owner = parkedKeys === null ? reader : servingParked(session, entry, parkedKeys);
  const makeCall = sortsInOwnNamespace(session, req) ? asRespoolCall : undefined;
  const error = ctx.router.send({ to: 'keys', owner, request: req, table: ctx.commands(), makeCall });
  if (error === null) return;
  // Keys in several slots: some commands are carried out over them anyway (cross-slot/dispatch.ts).
  if (isCrossSlot(error) && crossSlotKeyed(session, req, entry)) return;
  entry.fill(error);
}

/** A read the near cache took and could not answer: to its node, as it would have gone. */
function sendOn(session: HandlerSession, req: CommandRequest, entry: ReplyEntry): void {
  const ctx = session.ctx;
  const error = ctx.router.send({ to: 'keys', owner: entry, request: req, table: ctx.commands() });
  if (error !== null) entry.fill(error);
}

/** A write's keys when a parked client waits on one of them, else null. */
function feedsParked(session: HandlerSession, req: CommandRequest): Buffer[] | null {
  const { ctx } = session;
  if (!ctx.parking.waitingOnAny() || req.spec === undefined || (req.spec.flags & CommandFlag.WRITE) === 0) return null;
  const keys = ctx.commands().keyIndexes(req.spec, req.args).map((i) => req.args[i]!);
  return keys.length > 0 && ctx.parking.waitsOn(session.state.db, keys) ? keys : null;
}

/** The entry, its reply held until the parked clients on `keys` are served (errors: nothing was written, at once). */
function servingParked(session: HandlerSession, entry: ReplyEntry, keys: Buffer[]): CallOwner {
  const { ctx } = session;
  const db = session.state.db;
  return {
    client: entry.client,
    upstreamTimed: (node, ms) => entry.upstreamTimed(node, ms),
    onCallDone(reply) {
      if (reply[0] === 0x2d) return entry.onCallDone(reply);
      const kept = Buffer.from(reply);
      ctx.parking.afterServing(db, keys, () => entry.onCallDone(kept));
    },
  };
}

/**
 * SORT … BY / GET of a namespaced user who may read every key: its patterns were renamed into its
 * namespace (keys/request-names.ts), so every key the node reads for it is its own, as on a
 * server of its own. It runs as respool: the node would refuse BY and GET to the user's mirrored
 * identity, whose key pattern is the namespace (Valkey allows them to users with every key only).
 */
function sortsInOwnNamespace(session: HandlerSession, req: CommandRequest): boolean {
  if (req.command !== 'sort' && req.command !== 'sort_ro') return false;
  const acl = session.state.acl;
  return acl.allKeys && acl.keyNames?.namespace != null && req.spec !== undefined && needsNodeCheck(req.spec, req.args);
}

const asRespoolCall: CallFactory = (owner, router, raw, command, slot) => {
  const call = new UpstreamCall(owner, router, raw, command, slot);
  call.asRespool = true;
  return call;
};

function isCrossSlot(error: Buffer): boolean {
  return error[1] === 0x43 /* C */ && error.toString('latin1', 1, 10) === 'CROSSSLOT';
}

/**
 * Keyless commands any node answers (CONFIG GET, LATENCY …, MEMORY STATS, …): as keyed, but a
 * CONFIG GET of a per-node setting is answered with respool's own or refused (node-settings.ts).
 */
export const anyNode: Handler = (session, req) => {
  if (req.command.startsWith('latency|') && latencyEvents(session, req)) return; // every node's events, named with their node
  if (req.command === 'config|get') {
    const ctx = session.ctx;
    if (configGet(session, req, (owner) => ctx.router.send({ to: 'keys', owner, request: req, table: ctx.commands() }))) return;
  }
  keyed(session, req);
};

function normalizeHost(host: string): string {
  let h = host.toLowerCase();
  if (h.startsWith('[') && h.endsWith(']')) h = h.slice(1, -1);
  if (h.startsWith('::ffff:')) h = h.slice(7);
  return h;
}

/**
 * MIGRATE to respool itself: with none of its keys there, NOKEY — what the node answers before it
 * would connect anywhere (Valkey's migrateCommand); with one, refused (the node would restore the
 * keys onto themselves through respool, then delete them).
 */
function migrateToSelf(session: HandlerSession, req: CommandRequest): void {
  const args = req.args;
  const keys: Buffer[] = [];
  if (args.length > 3 && args[3]!.length > 0) keys.push(Buffer.from(args[3]!));
  const at = args.findIndex((a, i) => i > 5 && a.toString('latin1').toLowerCase() === 'keys');
  if (at > 0) for (const k of args.slice(at + 1)) keys.push(Buffer.from(k));
  const ctx = session.ctx;
  session.runExclusive(() => {
    const entry = session.reserve();
    const client = asRespoolClient(entry.client);
    void Promise.all(keys.map((k) => internalCall(ctx.router, client, [Buffer.from('EXISTS'), k], calculateSlot(k), true))).then((replies) => {
      entry.fill(replies.every((r) => r.toString('latin1') === ':0\r\n') ? NOKEY : encodeError(ProxyError.migrateToSelf()));
    });
  });
}

const NOKEY = encodeSimple('NOKEY');

/**
 * MIGRATE's destination is this respool (the address the client reached it at, its listen
 * address, or a loopback/wildcard address on its port): the node would send the keys back
 * through respool to itself — RESTORE onto the keys it then deletes.
 */
function migratesToRespool(session: HandlerSession, hostArg: Buffer, portArg: Buffer): boolean {
  const local = session.localAddress;
  const colon = local.lastIndexOf(':');
  if (portArg.toString('latin1') !== local.slice(colon + 1)) return false;
  const host = normalizeHost(hostArg.toString('latin1'));
  if (host === normalizeHost(local.slice(0, colon)) || host === normalizeHost(session.ctx.config.listen?.host ?? '')) return true;
  return host === 'localhost' || host === '::1' || host === '::' || host === '0.0.0.0' || host.startsWith('127.');
}
