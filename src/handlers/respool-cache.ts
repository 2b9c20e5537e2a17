import type { CommandRequest, HandlerSession } from '../client/handler-session.js';
import { ProxyError } from '../errors.js';
import { encodeArray, encodeBulk, encodeError, encodeInteger, encodeMap } from '../resp/encode.js';

export const RESPOOL_CACHE_HELP = [
  'RESPOOL CACHE STATS                   -- the near cache: entries, bytes, hit ratio, fills, invalidations, coalesced reads',
  'RESPOOL CACHE KEYS [count]            -- cached keys (as the nodes store them), most recently used first (default 100)',
  'RESPOOL CACHE FLUSH                   -- drops every entry (the nodes keep their keys); the count dropped',
];

/** RESPOOL CACHE STATS | KEYS [count] | FLUSH: this instance's near cache (src/nearcache). */
export function respoolCache(session: HandlerSession, req: CommandRequest): void {
  const cache = session.ctx.nearCache;
  const proto = session.state.protocol;
  const what = req.args[2]?.toString('latin1').toUpperCase();
  if (cache === undefined) return session.replyNow(encodeError(ProxyError.respool('no near cache here')));
  if (what === 'STATS' && req.args.length === 3) {
    const stats = Object.entries(cache.stats());
    return session.replyNow(encodeMap(stats.map(([k, v]) => [encodeBulk(k, proto), Number.isInteger(v) ? encodeInteger(v) : encodeBulk(String(v), proto)]), proto));
  }
  if (what === 'KEYS' && req.args.length <= 4) {
    const count = req.args.length === 4 ? Number(req.args[3]!.toString('latin1')) : 100;
    if (!Number.isSafeInteger(count) || count < 0) return session.replyNow(encodeError('ERR value is out of range, must be positive'));
    const keys = cache.recentEntries(count).map((e) => encodeBulk(e.key, proto));
    return session.replyNow(encodeArray(keys));
  }
  if (what === 'FLUSH' && req.args.length === 3) return session.replyNow(encodeInteger(cache.flush()));
  session.replyNow(encodeError(`ERR unknown subcommand or wrong number of arguments for 'RESPOOL CACHE${what === undefined ? '' : ` ${what}`}'. Try RESPOOL HELP.`));
}
