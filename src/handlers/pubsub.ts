import { encodeError } from '../resp/encode.js';
import { ProxyError } from '../errors.js';
import { refused } from './refused.js';
import type { Handler } from './types.js';

/** The SUBSCRIBE family, multiplexed over respool's subscriber connections. */
export const pubsub: Handler = refused;

const ALLOWED_WHILE_SUBSCRIBED: ReadonlySet<string> = new Set([
  'subscribe', 'psubscribe', 'ssubscribe', 'unsubscribe', 'punsubscribe', 'sunsubscribe', 'ping', 'quit', 'reset',
]);

/** In RESP2 subscribed mode, only these commands are allowed (Valkey's processCommand). */
export function allowedWhileSubscribed(command: string): boolean {
  return ALLOWED_WHILE_SUBSCRIBED.has(command);
}

export const refuseWhileSubscribed: Handler = (session, req) => {
  session.replyNow(encodeError(ProxyError.subscribedContextOnly(req.command)));
};
