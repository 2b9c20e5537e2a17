import { decodeReply, type RespValue } from '../resp/decode.js';

/**
 * What puts a value a blocking pop took back exactly where it came from: the same end of the
 * list, the same score in the sorted set. Built from the pop's own reply (as the node sent it),
 * so nothing is guessed:
 *
 *   BLPOP / BRPOP          [key, value]                     → LPUSH / RPUSH key value
 *   BLMPOP … LEFT|RIGHT    [key, [e1, e2, …]]               → LPUSH / RPUSH key … e2 e1 (e1 ends nearest the end it left)
 *   BZPOPMIN / BZPOPMAX    [key, member, score]             → ZADD key score member
 *   BZMPOP                 [key, [[member, score], …]]      → ZADD key score member …
 *
 * Null when the reply holds no value (nil, an error) or is not of that shape.
 */
export function putBackCommand(command: string, reply: Buffer, fromLeft: boolean): Array<Buffer | string> | null {
  let value: RespValue;
  try {
    value = decodeReply(reply, 16);
  } catch {
    return null;
  }
  if (!Array.isArray(value) || value.length < 2 || !Buffer.isBuffer(value[0])) return null;
  const key = value[0];
  switch (command) {
    case 'blpop':
    case 'brpop':
      return Buffer.isBuffer(value[1]) ? [command === 'blpop' ? 'LPUSH' : 'RPUSH', key, value[1]] : null;
    case 'blmpop': {
      const elements = value[1];
      if (!Array.isArray(elements) || elements.length === 0 || !elements.every((e) => Buffer.isBuffer(e))) return null;
      return [fromLeft ? 'LPUSH' : 'RPUSH', key, ...(elements as Buffer[]).reverse()];
    }
    case 'bzpopmin':
    case 'bzpopmax': {
      const [, member, score] = value;
      return Buffer.isBuffer(member) && score !== undefined ? ['ZADD', key, scoreText(score), member] : null;
    }
    case 'bzmpop': {
      const pairs = value[1];
      if (!Array.isArray(pairs) || pairs.length === 0) return null;
      const out: Array<Buffer | string> = ['ZADD', key];
      for (const pair of pairs) {
        if (!Array.isArray(pair) || pair.length !== 2 || !Buffer.isBuffer(pair[0])) return null;
        out.push(scoreText(pair[1]!), pair[0]);
      }
      return out;
    }
    default:
      return null;
  }
}

/** A score as ZADD reads it back to the same double: RESP2's text as sent, RESP3's double printed in full. */
function scoreText(score: RespValue): Buffer | string {
  if (Buffer.isBuffer(score)) return score;
  if (typeof score === 'number') return score === Infinity ? 'inf' : score === -Infinity ? '-inf' : String(score);
  return String(score);
}
