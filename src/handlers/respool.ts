import { HELP, runRespoolCommand } from '../hotkeys/control.js';
import { sharePeerCommand } from '../workers/peer-commands.js';
import { inWorker, mergeWindowReports, requestWorkerReports } from '../workers/hot-key-reports.js';
import { encodeArray, encodeError, encodeSimple } from '../resp/encode.js';
import { ProxyError } from '../errors.js';
import { arityError } from '../commands/command-table.js';
import type { Handler } from '../client/handler-session.js';
import { fleetReply } from '../fleet/fleet-view.js';
import { isObserveSubcommand, respoolObserve, RESPOOL_OBSERVE_HELP } from './respool-observe.js';
import { colocate, RESPOOL_COLOCATE_HELP } from './colocate-check.js';
import { RESPOOL_TENANTS_HELP, tenantSet, tenantsReply } from './tenants.js';
import { RESPOOL_CACHE_HELP, respoolCache } from './respool-cache.js';
import { RESPOOL_MIGRATE_HELP, respoolMigrate } from './respool-migrate.js';

/**
 * RESPOOL HOTKEYS | NODES | SPLIT …: respool's own command (src/hotkeys/control.ts). With users
 * configured only a user given +@respool-admin may run it (not +@all: it is respool's category);
 * with no users configured at all it stays open to every client.
 */
export const respool: Handler = (session, req) => {
  const { state, ctx } = session;
  // With no users configured the default user holds +@respool-admin (src/acl/user-directory.ts).
  if (state.user === null || !state.acl.respoolAdmin) {
    return session.replyNow(encodeError(ProxyError.noPerm(`User ${state.user ?? 'default'} has no permissions to run the 'respool' command`)));
  }
  const sub = req.args[1]?.toString('latin1').toUpperCase();
  if (sub === undefined || sub === 'HELP') return session.replyNow(encodeArray([...HELP, ...RESPOOL_OBSERVE_HELP, ...RESPOOL_COLOCATE_HELP, ...RESPOOL_TENANTS_HELP, ...RESPOOL_CACHE_HELP, ...RESPOOL_MIGRATE_HELP].map((l) => encodeSimple(l))));
  if (isObserveSubcommand(sub)) return respoolObserve(session, req, sub); // SLOWLOG, LATENCY, NODE (handlers/respool-observe.ts)
  if (sub === 'COLOCATE') return colocate(session, req); // CHECK, MOVE (handlers/colocate-check.ts)
  if (sub === 'CACHE') return respoolCache(session, req); // STATS, KEYS, FLUSH (handlers/respool-cache.ts)
  if (sub === 'MIGRATE') return respoolMigrate(session, req); // START, STATUS, VERIFY, CUTOVER, ABORT (handlers/respool-migrate.ts)
  if (sub === 'TENANTS') {
    const arity = arityError({ name: 'respool|tenants', arity: 2 }, req.args.length);
    return session.replyNow(arity !== null ? encodeError(arity) : tenantsReply(session)); // handlers/tenants.ts
  }
  if (sub === 'TENANT') return tenantSet(session, req, ctx.fleetAcl != null ? () => {} : sharePeerCommand); // in a fleet with shared state, the state carries it
  if (sub === 'FLEET') {
    // The fleet's members as this instance sees them (src/fleet/fleet-view.ts).
    const arity = arityError({ name: 'respool|fleet', arity: 2 }, req.args.length);
    if (arity !== null) return session.replyNow(encodeError(arity));
    const view = ctx.fleetView?.();
    return session.replyNow(view === undefined ? encodeError(ProxyError.respool('no fleet view here')) : fleetReply(view, state.protocol));
  }
  if (inWorker() && !ctx.hotKeys?.inFleet && (sub === 'HOTKEYS' || sub === 'NODES') && ctx.hotKeys?.detector != null) {
    // Workers: the whole respool's hot keys, every worker's report merged (src/workers/hot-key-reports.ts).
    const hotKeys = ctx.hotKeys;
    const args = req.args.map((a) => Buffer.from(a));
    const current = args.slice(2).some((a) => a.toString('latin1').toUpperCase() === 'CURRENT');
    const entry = session.reserve();
    requestWorkerReports(current).then(
      (reports) => runRespoolCommand(hotKeys, args, state.protocol, reports.length > 0 ? mergeWindowReports(reports, hotKeys.detector!.options.topK) : undefined),
      () => runRespoolCommand(hotKeys, args, state.protocol), // the supervisor is gone: this worker's own
    ).then((reply) => entry.fill(reply));
    return;
  }
  const reply = runRespoolCommand(ctx.hotKeys, req.args, state.protocol);
  // Workers: a split change reaches every worker (src/workers) — unless the fleet's state carries it.
  const share = ctx.hotKeys?.inFleet === true ? () => {} : sharePeerCommand;
  if (Buffer.isBuffer(reply)) {
    share(req.args, reply);
    session.replyNow(reply);
    return;
  }
  const args = req.args.map((a) => Buffer.from(a)); // the read buffer is not ours past this call
  const entry = session.reserve();
  void reply.then((r) => {
    share(args, r);
    entry.fill(r);
  });
};
