import type { ReplyNames } from '../keys/reply-names.js';
import type { SlotPart } from '../routing/slot-parts.js';
import type { CallClient } from '../routing/upstream-call.js';

/** One command queued inside MULTI, as respool will send (or answer) it at EXEC. */
export interface QueuedCommand {
  /** The request bytes (copied: the client's read buffer is reused). */
  readonly raw: Buffer;
  readonly command: string;
  /** The hash slot of its keys in a cluster; -1 for a keyless command (or a standalone upstream). */
  readonly slot: number;
  /**
   * A multi-key command (MGET, MSET, DEL …) whose keys span slots, in a transaction split by slot:
   * its key positions and one part per slot, each run in its slot's block; null otherwise.
   */
  readonly split: { readonly keys: readonly number[]; readonly parts: readonly SlotPart[] } | null;
  /** Answered by respool itself at EXEC (local commands): its arguments, copied. */
  readonly localArgs: Buffer[] | null;
  /** PUBLISH's channel (copied): its count is given as one server would, at EXEC. */
  readonly channel?: Buffer;
  /**
   * A SELECT forwarded inside the block (standalone upstream): the database it asks for, null
   * when its argument is no index (the server answers the error in EXEC's array).
   */
  readonly select?: number | null;
  /** How its element of EXEC's array turns back into the client's key names (a namespace, colocation rules), or null. */
  readonly replyNames?: ReplyNames | null;
  /** A write's keys (copied), kept when clients were parked at respool as it was queued: EXEC's reply waits until those on these keys are served. */
  readonly writes?: Buffer[];
  /** A tracking client's read-only command: its keys (copied), for respool's tracking table at EXEC (client/tracked-keys.ts). */
  readonly reads?: Buffer[];
  /**
   * A command that runs apart from the block, at EXEC in its place (handlers/transaction-apart.ts):
   * a whole-keyspace command in a cluster on every shard, a namespace's FLUSHDB … over its keys.
   * Its reply, for `caller` (never rejects).
   */
  readonly apart?: (caller: CallClient) => Promise<Buffer>;
}

/**
 * A MULTI … EXEC that respool holds (no WATCH): queued commands, and what EXEC must answer if it
 * cannot run them.
 *
 *   queued   : commands in the order they were sent, bounded by `bytes` ≤ the client's query limit
 *   dirty    : a command was refused at queue time (unknown, wrong arity, keys in two slots, not
 *              allowed in MULTI) → EXEC answers EXECABORT, as Valkey does
 *   slot     : the slot of the first keyed command (-1: none yet); a later command in another
 *              slot sets `crossSlot` → at EXEC one block per slot (transactions.crossSlot
 *              split, handlers/cross-slot/transaction-split.ts), or CROSSSLOT as a cluster node answers (refuse)
 *   selects  : a SELECT is queued (standalone upstream): it runs inside the block, the commands
 *              after it in its database; the block ends with a SELECT back to the link's own
 *              database, and the client's database becomes the last one switched to at EXEC
 */
export class Transaction {
  readonly queued: QueuedCommand[] = [];
  dirty = false;
  crossSlot = false;
  slot = -1;
  bytes = 0;
  /** EXEC ran where respool's subscriptions are held: PUBLISH counts are given as one server's. */
  publishCounts = false;
  /** A SELECT is among the forwarded commands (see the class comment). */
  selects = false;
  /**
   * Where respool's slow log stood when EXEC left (CommandLog.mark): a SLOWLOG RESET in the
   * transaction clears what was logged before, not what came in while EXEC was out — a pop its
   * push woke, answered first on another link (Valkey serves it after the EXEC).
   */
  slowLogMark: number | null = null;
}
