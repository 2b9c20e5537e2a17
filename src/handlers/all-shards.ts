import type { Handler } from './types.js';
import { keyed } from './keyed.js';

/**
 * Commands that speak for the whole data set (DBSIZE, KEYS, FLUSHALL, SCAN, SCRIPT LOAD, …): in
 * cluster mode every shard (or node) answers and routing/fan-out.ts merges the replies; against a
 * standalone server they are ordinary keyless commands.
 */
export const allShards: Handler = (session, req) => {
  const ctx = session.ctx;
  if (!ctx.isCluster() || req.spec === undefined) return keyed(session, req);
  const entry = session.reserve();
  const error = ctx.router.fanOut(entry, req.raw, req.args, req.spec, req.command);
  if (error !== null) entry.fill(error);
};
