import type { Handler } from './types.js';

/**
 * EVAL/EVALSHA/FCALL (and the _RO forms): routed by their declared keys like any keyed command
 * (numkeys 0 → any primary; keys in different slots → CROSSSLOT). A script's effects cannot be
 * split, so the hot-key hook refuses scripts that touch a split key.
 */
export const script: Handler = (session, req) => {
  const entry = session.reserve();
  const ctx = session.ctx;
  const error = ctx.router.routeKeyed(entry, req.raw, req.args, req.spec, ctx.commands(), req.command, true);
  if (error !== null) entry.fill(error);
};
