import type { CommandFamily } from '../commands/proxy-handling.js';
import type { HandlerSession } from '../client/handler-session.js';
import type { QueuedCommand, Transaction } from '../client/transaction-state.js';
import { ProxyError } from '../errors.js';
import { encodeError } from '../resp/encode.js';
import { blockResult, TransactionBlock, type BlockOutcome } from '../routing/transaction-block.js';
import type { RoutedRequest } from '../routing/route.js';
import type { CallClient } from '../routing/upstream-call.js';
import type { CommandSpec } from '../commands/command-table.js';
import { blockOnTrackingLane } from './tracking.js';

/** Whole-keyspace commands that keep their place in the block: respool answers them its own way (wait.ts, config-set.ts). */
const KEPT_IN_BLOCK: ReadonlySet<string> = new Set(['wait', 'waitaof', 'config|set']);

/**
 * Whether a command queued in MULTI runs apart from the transaction's block: in a cluster, a
 * command that speaks for the whole data set (FLUSHALL, FLUSHDB, DBSIZE, KEYS, SCAN, RANDOMKEY,
 * SCRIPT LOAD … — the allShards family) would run on the block's one node, over that node's keys
 * only; Valkey's one server runs it over all of them.
 */
export function runsApart(session: HandlerSession, family: CommandFamily, command: string): boolean {
  return family === 'allShards' && session.ctx.isCluster() && !KEPT_IN_BLOCK.has(command);
}

/** A whole-keyspace command (copied) on every shard, its replies merged (routing/fan-out.ts), for QueuedCommand.apart. */
export function everyShard(session: HandlerSession, request: RoutedRequest & { readonly spec: CommandSpec }): (caller: CallClient) => Promise<Buffer> {
  return (client) => new Promise((resolve) => {
    session.ctx.trackedKeys?.noteCommand(request.command); // a flush, as route() outside MULTI
    const owner = { client, onCallDone: (reply: Buffer) => resolve(Buffer.from(reply)) };
    const error = session.ctx.router.send({ to: 'all-nodes', owner, request });
    if (error !== null) resolve(error);
  });
}

/**
 * EXEC of a transaction with commands that run apart (runsApart): the queue runs in order, piece
 * by piece — the commands between two such commands as one MULTI … EXEC block on the
 * transaction's slot, each such command on every shard with its replies merged as outside a
 * transaction (Router.send to: 'all-nodes', routing/fan-out.ts) — and `done` gets every forwarded
 * command's reply in queue order, as one server's EXEC array has them.
 *
 *   order     : a piece is sent once the one before it answered, so each sees the effects of
 *               the ones before (SET, FLUSHALL, DBSIZE counts 0)
 *   isolation : other clients' commands may run between two pieces — a cluster has no
 *               transaction over every shard; each block is still atomic on its node
 *   failure   : a block that did not run (EXECABORT, a lost link) ends EXEC with its error; the
 *               pieces before it ran (docs/commands.md)
 */
export function execApart(session: HandlerSession, tx: Transaction, forwarded: readonly QueuedCommand[], done: (replies: Buffer[] | Buffer) => void): void {
  const replies: Buffer[] = [];
  let next = 0;
  const runNext = (): void => {
    if (next >= forwarded.length) return done(replies);
    const apart = forwarded[next]!.apart;
    if (apart !== undefined) {
      next++;
      void apart(session).then((reply) => {
        replies.push(reply);
        runNext();
      });
      return;
    }
    const start = next;
    while (next < forwarded.length && forwarded[next]!.apart === undefined) next++;
    const piece = forwarded.slice(start, next);
    const commands = piece.map((q) => q.raw);
    const settle = (outcome: BlockOutcome): void => {
      const ran = blockReplies(outcome, commands.length);
      if (Buffer.isBuffer(ran)) return done(ran);
      replies.push(...ran);
      runNext();
    };
    // A tracking client's block goes on its lane, so the reads in it are tracked (tracking.ts).
    const lanes = session.state.tracking;
    if (lanes !== null) blockOnTrackingLane(session, lanes, tx.slot, piece.flatMap((q) => q.reads ?? []), commands, settle);
    else new TransactionBlock(session.ctx.router, session, tx.slot, commands, settle).send();
  };
  runNext();
}

/** A block's replies (copied), or the error EXEC answers when it did not run. */
function blockReplies(outcome: BlockOutcome, size: number): Buffer[] | Buffer {
  const result = blockResult(outcome, size);
  return result.kind === 'ran' ? result.replies : encodeError(result.error);
}
