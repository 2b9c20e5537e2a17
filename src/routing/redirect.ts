/**
 * Recognises the error replies that mean "the command did not run here; try again":
 *   -MOVED <slot> <host>:<port>    the slot lives elsewhere now (update the map, resend)
 *   -ASK <slot> <host>:<port>      mid-migration: send ASKING then the command to that node once
 *   -TRYAGAIN …                    multi-key command during resharding: retry shortly
 *   -CLUSTERDOWN …                 the cluster cannot serve the slot right now: retry shortly
 *   -LOADING …                     the node is loading its dataset: retry shortly
 * Only these are retried: each one guarantees the command was not executed.
 */
export type Redirect =
  | { kind: 'moved' | 'ask'; slot: number; host: string; port: number }
  | { kind: 'tryagain' | 'clusterdown' | 'loading' };

const M = 0x4d, A = 0x41, T = 0x54, C = 0x43, L = 0x4c;

/** Parses a reply frame that starts with "-"; null when it is an ordinary error. */
export function parseRedirect(frame: Buffer): Redirect | null {
  // Cheap first-letter filter: most error replies are ERR/WRONGTYPE and skip all parsing.
  const first = frame[1];
  if (first !== M && first !== A && first !== T && first !== C && first !== L) return null;
  return parseRedirectText(frame.toString('latin1', 1, Math.min(frame.length, 300)));
}

/** As parseRedirect, from an error's text without the "-" (a subscriber connection's refusal, pubsub/shard-subscribers.ts). */
export function parseRedirectText(line: string): Redirect | null {
  if (line.startsWith('MOVED ') || line.startsWith('ASK ')) {
    const match = /^(MOVED|ASK) (\d+) (\S*):(\d+)/.exec(line);
    if (!match) return null;
    const host = match[3]!.startsWith('[') ? match[3]!.slice(1, -1) : match[3]!;
    return { kind: match[1] === 'MOVED' ? 'moved' : 'ask', slot: Number(match[2]), host, port: Number(match[4]) };
  }
  if (line.startsWith('TRYAGAIN')) return { kind: 'tryagain' };
  if (line.startsWith('CLUSTERDOWN')) return { kind: 'clusterdown' };
  if (line.startsWith('LOADING')) return { kind: 'loading' };
  return null;
}

/** Whether an error reply is MOVED or ASK (which a redirect follower may follow: routing/redirect-follower.ts). */
export function isMovedOrAsk(frame: Buffer): boolean {
  const first = frame[1];
  return frame[0] === 0x2d && (first === M || first === A) && (frame.toString('latin1', 1, 7) === 'MOVED ' || frame.toString('latin1', 1, 5) === 'ASK ');
}

/** The error's first line without "-" and CRLF, for messages. */
export function errorLine(frame: Buffer): string {
  const end = frame.indexOf(0x0d);
  return frame.toString('utf8', 1, end < 0 ? frame.length : end);
}
