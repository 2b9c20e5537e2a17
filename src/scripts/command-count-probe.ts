import { encodeCommand } from '../resp/encode.js';
import type { FramesAround, LinkRequest } from '../upstream/link-request.js';

const CLIENT_INFO = encodeCommand(['CLIENT', 'INFO']);
const TOT_CMDS = Buffer.from(' tot-cmds=');

/**
 * How many commands one run of a script ran on its node, for the caller's CLIENT LIST / INFO
 * tot-cmds (Valkey counts every server.call in the calling client's count). respool sees the
 * EVAL, not what ran inside it; the node's count for the link, read right before and right after
 * it, tells. `CLIENT INFO`, the script, `CLIENT INFO` are written back to back on one link (the
 * node runs one connection's commands in order, nothing of another client's between them):
 *
 *   CLIENT INFO   answers tot-cmds = t (a command is counted once it has run: not itself)
 *   [extra]       commands respool sent between (ASKING before a script sent to an ASK target)
 *   EVAL …        counted once, and each command it ran: k
 *   CLIENT INFO   answers t + 1 + extra + 1 + k
 *
 * One probe per send of the call (a redirect sends it again, with a probe of its own). A probe
 * whose replies do not both come (a lost link) or do not carry tot-cmds (an error) knows nothing.
 */
export class CommandCountProbe {
  private before: number | null = null;
  private after: number | null = null;
  private settled = false;
  private waiters: Array<() => void> = [];

  constructor(private readonly extra = 0) {}

  readonly frames: FramesAround = {
    before: { data: CLIENT_INFO, req: this.request((n) => (this.before = n)) },
    after: { data: CLIENT_INFO, req: this.request((n) => (this.after = n), true) },
  };

  /** The commands the script ran (not counting itself), or null when the probe could not tell. */
  get ran(): number | null {
    if (this.before === null || this.after === null) return null;
    const k = this.after - this.before - 2 - this.extra;
    return k >= 0 ? k : null;
  }

  /** Whether the second reply came (or the link failed). */
  get isSettled(): boolean {
    return this.settled;
  }

  /** Calls `fn` once the second reply came (or the link failed): at once if it has. */
  whenSettled(fn: () => void): void {
    if (this.settled) fn();
    else this.waiters.push(fn);
  }

  /** One CLIENT INFO's request; the last one's reply, or its failure (every request of a lost link fails), settles the probe. */
  private request(onCount: (n: number) => void, last = false): LinkRequest {
    const settle = () => {
      if (!last || this.settled) return;
      this.settled = true;
      for (const fn of this.waiters.splice(0)) fn();
    };
    return {
      sentAt: 0,
      onReply: (frame) => {
        const count = totCmds(frame);
        if (count !== null) onCount(count);
        settle();
      },
      onLinkFailure: settle,
    };
  }
}

/** tot-cmds=N out of a CLIENT INFO reply (RESP2 bulk or RESP3 verbatim string); null when absent (an error). */
export function totCmds(frame: Buffer): number | null {
  if (frame[0] !== 0x24 /* $ */ && frame[0] !== 0x3d /* = */) return null;
  const at = frame.indexOf(TOT_CMDS);
  if (at < 0) return null;
  let n = 0;
  let i = at + TOT_CMDS.length;
  const start = i;
  for (; i < frame.length && frame[i]! >= 0x30 && frame[i]! <= 0x39; i++) n = n * 10 + frame[i]! - 0x30;
  return i > start ? n : null;
}
