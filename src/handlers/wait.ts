import { encodeCommand } from '../resp/encode.js';
import type { CommandRequest, Handler } from '../client/handler-session.js';
import { keyed } from './keyed.js';

/**
 * WAIT numreplicas timeout / WAITAOF numlocal numreplicas timeout: Valkey's guarantee is about
 * the writes the client sent before it on its connection (its write offset). A client's writes
 * travel on its own link to each primary (the link its id picks), in order, so WAIT is sent on
 * those same links, to every primary (one in front of a standalone server): each node waits
 * until its replicas acknowledged everything written on that link so far — the client's own
 * writes and maybe other clients' before them (never less than Valkey promises). The replies
 * are merged as the command's tips say (agg_min): the guarantee that holds on every node.
 *
 * What it costs others: while a node waits, the link it waits on carries nothing else, so the
 * clients sharing it wait too. The wait is bounded: its timeout is capped at half of
 * timeouts.commandMs (0, "for ever", included) — past that a reply says how many replicas
 * acknowledged so far, as Valkey's does at its timeout. Writes a client made on a leased
 * connection (WATCH … EXEC, a tracking lane) are not on its shared links: a WAIT after them
 * waits for the shared links' writes only (docs/commands.md).
 */
export const wait: Handler = (session, req) => {
  const ctx = session.ctx;
  const n = req.args.length;
  const capMs = Math.max(1, Math.floor(ctx.config.timeouts.commandMs / 2));
  const timeout = /^\d{1,15}$/.test(req.args[n - 1]?.toString('latin1') ?? '') ? Number(req.args[n - 1]!.toString('latin1')) : null;
  // A malformed command is forwarded as it is: the node answers Valkey's own error.
  let capped: CommandRequest = req;
  if (timeout !== null && (timeout === 0 || timeout > capMs) && n === (req.command === 'wait' ? 3 : 4)) {
    const args = [...req.args.slice(0, n - 1), Buffer.from(String(capMs))];
    capped = { ...req, args, raw: encodeCommand(args) };
  }
  if (!ctx.isCluster() || req.spec === undefined) return keyed(session, capped);
  const entry = session.reserve();
  const error = ctx.router.send({ to: 'all-nodes', owner: entry, request: { raw: capped.raw, args: capped.args, spec: req.spec, command: req.command } });
  if (error !== null) entry.fill(error);
};
