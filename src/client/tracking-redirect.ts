import { encodeCommand } from '../resp/encode.js';
import type { HandlerSession } from './handler-session.js';

/**
 * CLIENT TRACKING … REDIRECT <id> through respool. The id names a respool client (CLIENT ID
 * through respool), which no upstream node knows. So each lane of a redirecting client gets a
 * listener: a RESP3 connection of its own on the same node, and the lane is sent
 * `REDIRECT <the listener's upstream id>`. The node then sends the lane's invalidations to the
 * listener as `>2 invalidate <keys>` pushes, whatever protocol the lane speaks (a RESP2 lane
 * cannot receive them itself), and respool delivers each one to the respool client named by
 * the id as Valkey's sendTrackingMessage would (tracking.c):
 *   - a RESP3 target: the push as it is;
 *   - a RESP2 target with subscriptions: a pub/sub message on `__redis__:invalidate`;
 *   - a RESP2 target without: nothing;
 *   - no such client any more: the redirect is broken (CLIENT TRACKINGINFO says so) and a RESP3
 *     tracking client is sent `tracking-redir-broken <id>`.
 */

/** A CLIENT TRACKING line as the client sent it; `redirectAt`: the index of REDIRECT's id, or -1. */
export interface TrackingLine {
  readonly args: readonly Buffer[];
  readonly redirectAt: number;
}

/** The line a lane is sent: REDIRECT's id (a respool client's) replaced by its listener's upstream id. */
export function encodeTrackingLine(line: TrackingLine, listenerId: number | null): Buffer {
  if (line.redirectAt < 0) return encodeCommand(line.args);
  const args = [...line.args];
  args[line.redirectAt] = Buffer.from(String(listenerId ?? 0));
  return encodeCommand(args);
}

const INVALIDATE_HEADER = Buffer.from('>2\r\n$10\r\ninvalidate\r\n');
const MESSAGE_HEADER = Buffer.from('*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n');
const NULL_BULK = Buffer.from('$-1\r\n');

/** Looks a respool client up by id (the server's session table). */
/**
 * Delivers one invalidation push that a listener received (`>2 invalidate <keys>`) to the
 * redirect target. Returns false when the target is gone (the caller marks the redirect broken).
 */
export function deliverInvalidation(target: HandlerSession | undefined, push: Buffer): boolean {
  if (target === undefined || target.closed) return false;
  if (target.state.protocol === 3) {
    target.push(Buffer.from(push));
    return true;
  }
  const subscribed = target.state.subscriptions !== null && target.state.subscriptions.total() > 0;
  if (subscribed && push.length > INVALIDATE_HEADER.length && push.compare(INVALIDATE_HEADER, 0, INVALIDATE_HEADER.length, 0, INVALIDATE_HEADER.length) === 0) {
    const keys = push.subarray(INVALIDATE_HEADER.length);
    // "Everything" is RESP3's null (_) from the node; a RESP2 subscriber gets a null bulk, as from Valkey.
    target.push(Buffer.concat([MESSAGE_HEADER, keys[0] === 0x5f /* _ */ ? NULL_BULK : keys]));
  }
  return true;
}

/** Valkey's push to a RESP3 tracking client whose redirect target has gone. */
export function redirBrokenPush(id: number): Buffer {
  return Buffer.from(`>2\r\n$21\r\ntracking-redir-broken\r\n:${id}\r\n`);
}

/**
 * A lane's CLIENT TRACKINGINFO reply, as the client's own: `redirect` is the respool id the
 * client gave (the lane's says its listener's upstream id), and `broken_redirect` ends the
 * flags when the target has gone (the lane's listener is alive, so the node cannot know).
 */
export function rewriteTrackingInfo(reply: Buffer, redirectTo: number, broken: boolean): Buffer {
  if (reply[0] === 0x2d) return reply;
  let text = reply.toString('latin1');
  text = text.replace(/\$8\r\nredirect\r\n:(-?\d+)\r\n/, (all, id: string) => (id === '-1' ? all : `$8\r\nredirect\r\n:${redirectTo}\r\n`));
  if (broken) {
    // The flags are an array in RESP2, a set in RESP3.
    text = text.replace(/\$5\r\nflags\r\n([*~])(\d+)\r\n/, (_all, type: string, n: string) => `$5\r\nflags\r\n${type}${Number(n) + 1}\r\n`);
    text = text.replace(/\$8\r\nredirect\r\n/, '$15\r\nbroken_redirect\r\n$8\r\nredirect\r\n');
  }
  return Buffer.from(text, 'latin1');
}
