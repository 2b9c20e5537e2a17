import { encodeError } from '../resp/encode.js';
import { ProxyError } from '../errors.js';
import { oneShotCommand } from '../upstream/one-shot.js';
import type { Handler } from './types.js';

/**
 * EVAL/EVALSHA/FCALL (and the _RO forms): routed by their declared keys like any keyed command
 * (numkeys 0 → any primary; keys in different slots → CROSSSLOT). A script's effects cannot be
 * split, so the hot-key hook refuses scripts that touch a split key.
 */
export const script: Handler = (session, req) => {
  if (req.command === 'script|kill' || req.command === 'function|kill') return scriptKill(session, req);
  const entry = session.reserve();
  const ctx = session.ctx;
  const error = ctx.router.routeKeyed(entry, req.raw, req.args, req.spec, ctx.commands(), req.command, true);
  if (error !== null) entry.fill(error);
};

/**
 * SCRIPT KILL / FUNCTION KILL: to every primary at once, each on a connection of its own (the
 * shared link to a busy node may be the one stuck behind the script), and merged: +OK from the
 * node that was busy; else UNKILLABLE if a node's script already wrote; else Valkey's NOTBUSY.
 */
export const scriptKill: Handler = (session, req) => {
  const ctx = session.ctx;
  const topology = ctx.router.topology();
  if (topology === null) return session.replyNow(encodeError(ProxyError.topologyUnknown()));
  const entry = session.reserve();
  const raw = req.args.map((a) => Buffer.from(a));
  const timeoutMs = ctx.config.timeouts.commandMs;
  ctx.metrics?.commandCounter(req.command).inc();
  Promise.all(
    topology.primaries().map((node) =>
      oneShotCommand({ host: node.host, port: node.port, auth: ctx.config.upstreamAuth, timeoutMs }, raw).catch((err: Error) => encodeError(err.message)),
    ),
  ).then((replies) => {
    const ok = replies.find((r) => r[0] !== 0x2d);
    const unkillable = replies.find((r) => r.toString('latin1', 1, 11) === 'UNKILLABLE');
    entry.fill(ok ?? unkillable ?? replies.find((r) => r.toString('latin1', 1, 8) === 'NOTBUSY') ?? replies[0]!);
  });
};
