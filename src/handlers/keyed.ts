import type { Handler } from './types.js';

/**
 * Keyed and keyless commands for one node: the router picks the node (slot owner, read strategy,
 * any primary) and the call completes the entry. Keys in different slots: CROSSSLOT.
 */
export const keyed: Handler = (session, req) => {
  const entry = session.reserve();
  const ctx = session.ctx;
  const error = ctx.router.routeKeyed(entry, req.raw, req.args, req.spec, ctx.commands(), req.command);
  if (error !== null) entry.fill(error);
};
