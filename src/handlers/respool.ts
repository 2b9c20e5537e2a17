import { HELP, runRespoolCommand } from '../hotkeys/control.js';
import { sharePeerCommand } from '../workers/peer-commands.js';
import { inWorker, mergeWindowReports, requestWorkerReports } from '../workers/hot-key-reports.js';
import { encodeArray, encodeError, encodeSimple } from '../resp/encode.js';
import { ProxyError } from '../errors.js';
import { usersOf } from '../acl/users.js';
import type { Handler } from './types.js';
import { isObserveSubcommand, respoolObserve, RESPOOL_OBSERVE_HELP } from './respool-observe.js';

/**
 * RESPOOL HOTKEYS | NODES | SPLIT …: respool's own command (src/hotkeys/control.ts). With users
 * configured only a user given +@respool-admin may run it (not +@all: it is respool's category);
 * with no users configured at all it stays open to every client.
 */
export const respool: Handler = (session, req) => {
  const { state, ctx } = session;
  const acl = usersOf(ctx.config);
  if (!acl.open) {
    const user = state.user === null ? undefined : acl.byName.get(state.user);
    if (user === undefined || !user.respoolAdmin) {
      return session.replyNow(encodeError(ProxyError.noPerm(`User ${state.user ?? 'default'} has no permissions to run the 'respool' command`)));
    }
  }
  const sub = req.args[1]?.toString('latin1').toUpperCase();
  if (sub === undefined || sub === 'HELP') return session.replyNow(encodeArray([...HELP, ...RESPOOL_OBSERVE_HELP].map((l) => encodeSimple(l))));
  if (isObserveSubcommand(sub)) return respoolObserve(session, req, sub); // SLOWLOG, LATENCY, NODE (handlers/respool-observe.ts)
  if (inWorker() && (sub === 'HOTKEYS' || sub === 'NODES') && ctx.hotKeys?.detector != null) {
    // Workers: the whole respool's hot keys, every worker's report merged (src/workers/hot-key-reports.ts).
    const hotKeys = ctx.hotKeys;
    const args = req.args.map((a) => Buffer.from(a));
    const current = args.slice(2).some((a) => a.toString('latin1').toUpperCase() === 'CURRENT');
    const entry = session.reserve();
    requestWorkerReports(current).then(
      (reports) => entry.fill(runRespoolCommand(hotKeys, args, state.protocol, reports.length > 0 ? mergeWindowReports(reports, hotKeys.detector!.options.topK) : undefined)),
      () => entry.fill(runRespoolCommand(hotKeys, args, state.protocol)), // the supervisor is gone: this worker's own
    );
    return;
  }
  const reply = runRespoolCommand(ctx.hotKeys, req.args, state.protocol);
  sharePeerCommand(req.args, reply); // workers: a split change reaches every worker (src/workers)
  session.replyNow(reply);
};
