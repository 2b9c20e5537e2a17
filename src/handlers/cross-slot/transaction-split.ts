import { encodeError } from '../../resp/encode.js';
import { ProxyError } from '../../errors.js';
import { blockResult, TransactionBlock, type BlockOutcome } from '../../routing/transaction-block.js';
import type { TransactionGroupOutcome } from '../../metrics/metric-definitions.js';
import type { QueuedCommand } from '../../client/transaction-state.js';
import { mergeMultiKeyReplies } from './multi-key.js';
import type { HandlerSession } from '../../client/handler-session.js';

/** One command (or, for a multi-key command split by slot, one part of it) in a slot's block. */
interface Member {
  /** The command's place among the forwarded commands. */
  readonly command: number;
  /** Its part (QueuedCommand.split), -1 for a whole command. */
  readonly part: number;
}

/** One slot's share of a split transaction. */
interface Group {
  readonly slot: number;
  readonly members: Member[];
}

/**
 * EXEC of a transaction (no WATCH) whose commands hash to several slots, with
 * transactions.crossSlot = split: the forwarded commands are grouped by slot (a keyless command
 * rides with the group of the first keyed command), each group is written as its own
 * MULTI … EXEC block on its slot's primary — all groups at once, each following MOVED/ASK on its
 * own (routing/transaction-block.ts) — and the client gets one EXEC array holding every
 * command's reply in the order the commands were queued.
 *
 * A multi-key command over several slots (MGET, MSET, DEL, UNLINK, EXISTS, TOUCH) has one part
 * in each of its slots' blocks; its reply is merged from theirs as outside a transaction.
 *
 * Each group is atomic on its node; the transaction as a whole is not: another client may see
 * one group's writes before another's. A group that fails gives each of its commands an error
 * naming its slot and node (did not run, or may or may not have run); the other groups ran and
 * nothing is re-sent. When no group ran at all the client gets one error instead of the array:
 * Valkey's EXECABORT when every node refused its block, else the first group's error.
 *
 * `finish` turns the forwarded commands' replies (in forwarded order) into EXEC's reply, with
 * respool's own commands' replies spliced in (handlers/transaction.ts).
 */
export function execSplit(session: HandlerSession, forwarded: readonly QueuedCommand[], finish: (replies: Buffer[]) => Buffer): void {
  const ctx = session.ctx;
  const groups = groupBySlot(forwarded);
  const entry = session.reserve();
  const outcomes: Array<BlockOutcome | null> = groups.map(() => null);
  let remaining = groups.length;
  const settle = (index: number, outcome: BlockOutcome): void => {
    if (outcomes[index] !== null) return;
    outcomes[index] = outcome;
    if (--remaining > 0) return;
    entry.fill(mergeGroups(session, groups, outcomes as BlockOutcome[], forwarded, finish));
  };
  groups.forEach((group, i) => {
    const commands = group.members.map((m) => (m.part < 0 ? forwarded[m.command]!.raw : forwarded[m.command]!.split!.parts[m.part]!.raw));
    new TransactionBlock(ctx.router, session, group.slot, commands, (outcome) => settle(i, outcome)).send();
  });
}

/** Groups in the order their slots first appear; keyless commands join the first keyed group. */
function groupBySlot(forwarded: readonly QueuedCommand[]): Group[] {
  const first = forwarded.find((q) => q.slot >= 0)!.slot;
  const bySlot = new Map<number, Group>();
  const add = (slot: number, member: Member): void => {
    let group = bySlot.get(slot);
    if (group === undefined) bySlot.set(slot, (group = { slot, members: [] }));
    group.members.push(member);
  };
  forwarded.forEach((q, i) => {
    if (q.split !== null) q.split.parts.forEach((p, j) => add(p.slot, { command: i, part: j }));
    else add(q.slot < 0 ? first : q.slot, { command: i, part: -1 });
  });
  return [...bySlot.values()];
}

interface GroupResult {
  outcome: TransactionGroupOutcome;
  /** The group's replies, in its members' order (errors when it failed). */
  replies: Buffer[];
  /** The one error the client gets for this group when no group ran. */
  error: string | null;
}

function mergeGroups(
  session: HandlerSession,
  groups: readonly Group[],
  outcomes: readonly BlockOutcome[],
  forwarded: readonly QueuedCommand[],
  finish: (replies: Buffer[]) => Buffer,
): Buffer {
  const results = groups.map((group, i) => groupResult(group, outcomes[i]!));
  const metrics = session.ctx.metrics;
  for (const r of results) metrics?.crossSlotTransactionGroups[r.outcome].inc();
  if (results.every((r) => r.outcome !== 'ok')) return encodeError(results[0]!.error!);
  const replies = new Array<Buffer>(forwarded.length);
  const partReplies = new Map<number, Buffer[]>();
  groups.forEach((group, i) =>
    group.members.forEach((m, j) => {
      const reply = results[i]!.replies[j]!;
      if (m.part < 0) replies[m.command] = reply;
      else {
        let list = partReplies.get(m.command);
        if (list === undefined) partReplies.set(m.command, (list = []));
        list[m.part] = reply;
      }
    }),
  );
  for (const [index, list] of partReplies) {
    const split = forwarded[index]!.split!;
    const failed = list.find((r) => r[0] === 0x2d || r[0] === 0x21);
    replies[index] = failed ?? mergeMultiKeyReplies(forwarded[index]!.command, split.keys, split.parts, list);
  }
  return finish(replies);
}

function groupResult(group: Group, outcome: BlockOutcome): GroupResult {
  const size = group.members.length;
  const failed = (kind: TransactionGroupOutcome, ran: boolean, why: string): GroupResult => {
    const text = encodeError(ProxyError.splitGroupFailed(group.slot, outcome.node, ran, why));
    return { outcome: kind, replies: new Array<Buffer>(size).fill(text), error: why };
  };
  const result = blockResult(outcome, size);
  if (result.kind === 'ran') return { outcome: 'ok', replies: result.replies, error: null };
  if (result.kind === 'aborted') return failed('aborted', false, result.error);
  return result.written ? failed('connection_lost', true, result.error) : failed('not_sent', false, result.error);
}
