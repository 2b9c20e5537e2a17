/**
 * Precomputed replies the proxy sends often. They are shared: write them to sockets, never
 * modify them (typed arrays cannot be frozen).
 */
const reply = (s: string): Buffer => Buffer.from(s, 'latin1');

export const OK = reply('+OK\r\n');
export const PONG = reply('+PONG\r\n');
export const QUEUED = reply('+QUEUED\r\n');
export const RESET = reply('+RESET\r\n');

/** RESP2 null bulk string; RESP3 uses NULL_RESP3 for every null. */
export const NULL_BULK_RESP2 = reply('$-1\r\n');
export const NULL_BULK = NULL_BULK_RESP2;
/** RESP2 null array (e.g. EXEC after a failed WATCH, BLPOP timeout). */
export const NULL_ARRAY_RESP2 = reply('*-1\r\n');
export const NULL_ARRAY = NULL_ARRAY_RESP2;
export const NULL_RESP3 = reply('_\r\n');

export const EMPTY_ARRAY = reply('*0\r\n');
export const EMPTY_BULK = reply('$0\r\n\r\n');
export const EMPTY_MAP_RESP3 = reply('%0\r\n');
export const EMPTY_SET_RESP3 = reply('~0\r\n');

export const ZERO = reply(':0\r\n');
export const ONE = reply(':1\r\n');

/** The null a client of the given protocol expects in place of a bulk string. */
export function nullBulk(proto: 2 | 3): Buffer {
  return proto === 3 ? NULL_RESP3 : NULL_BULK_RESP2;
}

/** The null a client of the given protocol expects in place of an array. */
export function nullArray(proto: 2 | 3): Buffer {
  return proto === 3 ? NULL_RESP3 : NULL_ARRAY_RESP2;
}
