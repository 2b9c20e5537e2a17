import { encodeError } from '../../resp/encode.js';
import type { ReplyEntry } from '../../client/reply-queue.js';
import { splitKeyWrite } from './written-keys.js';
import { copyAndRun } from './reads.js';
import { listMoveCrossSlot } from './list-move.js';
import { streamReadCrossSlot } from './stream-reads.js';
import type { CommandRequest, HandlerSession } from '../../client/handler-session.js';

/**
 * A keyed command whose keys hash to several slots (the router answered CROSSSLOT): carried out
 * over those slots when respool can give one server's answer — reads that need every key at once
 * and the …STORE forms on copies (reads.ts), XREAD / XREADGROUP without BLOCK
 * (stream-reads.ts), LMOVE / RPOPLPUSH (list-move.ts). `entry` is the request's
 * reserved reply. False: the command keeps CROSSSLOT (RENAME, COPY, SMOVE, MSETNX, SORT … STORE,
 * scripts …). Blocking commands: blocking-pops.ts.
 */
export function crossSlotKeyed(session: HandlerSession, req: CommandRequest, entry: ReplyEntry): boolean {
  const refusal = splitKeyWrite(session, req);
  if (refusal !== null) {
    entry.fill(encodeError(refusal));
    return true;
  }
  switch (req.command) {
    case 'lmove':
    case 'rpoplpush':
      return listMoveCrossSlot(session, req, entry);
    case 'xread':
    case 'xreadgroup':
      return streamReadCrossSlot(session, req, entry);
    default:
      return copyAndRun(session, req, entry);
  }
}

