import calculateSlot from 'cluster-key-slot';
import { COPY_STORES } from './reads.js';
import type { CommandRequest, HandlerSession } from '../../client/handler-session.js';

/** The keys a store or move over several slots writes: its destination (and a move's source). */
function writtenKeys(req: CommandRequest): number[] {
  const destination = COPY_STORES.get(req.command);
  if (destination !== undefined) return [destination];
  if (req.command === 'lmove' || req.command === 'rpoplpush' || req.command === 'blmove' || req.command === 'brpoplpush') return [1, 2];
  return [];
}

/**
 * A store or move over several slots writes its keys on one node each, as one command: a split
 * hot key's copies would not be written, so it is refused as the hot-key rules refuse such
 * writes (hotkeys/hot-keys.ts). Null when none of its written keys is split.
 */
export function splitKeyWrite(session: HandlerSession, req: CommandRequest): string | null {
  const hook = session.ctx.router.keyedHook;
  if (hook === null) return null;
  for (const p of writtenKeys(req)) {
    const key = req.args[p];
    if (key === undefined) continue;
    const refusal = hook.refuseInTransaction(req.args, [p], calculateSlot(key), req.command, 'respool writes it on one node as part of a command over several slots, so its copies would not be written');
    if (refusal !== null) return refusal;
  }
  return null;
}
