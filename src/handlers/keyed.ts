import calculateSlot from 'cluster-key-slot';
import { asRespoolClient, internalCall } from '../routing/internal-call.js';
import { latencyEvents } from './latency-events.js';
import { encodeError, encodeSimple } from '../resp/encode.js';
import { ProxyError } from '../errors.js';
import { crossSlotKeyed } from './cross-slot.js';
import type { CommandRequest, Handler, HandlerSession } from '../client/handler-session.js';
import { configGet } from './node-settings.js';
import { needsNodeCheck } from '../acl/command-check.js';
import { UpstreamCall, type CallFactory } from '../routing/upstream-call.js';

/**
 * Keyed and keyless commands for one node: the router picks the node (slot owner, read strategy,
 * any primary) and the call completes the entry. Keys in different slots: cross-slot.ts, else
 * CROSSSLOT.
 */
export const keyed: Handler = (session, req) => {
  if (req.command === 'migrate' && req.args.length >= 3 && migratesToRespool(session, req.args[1]!, req.args[2]!)) return migrateToSelf(session, req);
  const entry = session.reserve();
  const ctx = session.ctx;
  const error = ctx.router.routeKeyed(entry, req.raw, req, req.spec, ctx.commands(), req.command, false, sortsInOwnNamespace(session, req) ? asRespoolCall : undefined);
  if (error === null) return;
  // Keys in several slots: some commands are carried out over them anyway (cross-slot.ts).
  if (isCrossSlot(error) && crossSlotKeyed(session, req, entry)) return;
  entry.fill(error);
};

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
    if (configGet(session, req, (owner) => ctx.router.routeKeyed(owner, req.raw, req, req.spec, ctx.commands(), req.command))) return;
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
