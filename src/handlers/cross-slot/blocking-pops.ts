import calculateSlot from 'cluster-key-slot';
import { encodeCommand, encodeError } from '../../resp/encode.js';
import { splitAggregate } from '../../resp/decode.js';
import { nullArray } from '../../resp/constant-replies.js';
import { TransactionBlock } from '../../routing/transaction-block.js';
import { internalCall } from '../../routing/internal-call.js';
import type { ReplyEntry } from '../../client/reply-queue.js';
import { BlockingCall } from '../blocking-call.js';
import { commandTimeoutMs } from '../blocking-timeout.js';
import { NO_REPLY } from '../local.js';
import { putBackCommand } from '../../parking/put-back.js';
import { isNilReply } from '../../parking/pop-forms.js';
import { streamReadCrossSlot } from './stream-reads.js';
import { listMoveCrossSlot } from './list-move.js';
import { splitKeyWrite } from './written-keys.js';
import type { CommandRequest, HandlerSession } from '../../client/handler-session.js';

/** Pops whose keys are checked in order: the first non-empty key wins. */
const POPS: ReadonlySet<string> = new Set(['blpop', 'brpop', 'blmpop', 'bzpopmin', 'bzpopmax', 'bzmpop']);
/** Commands with a numkeys argument just before their keys. */
const NUMKEYS: ReadonlySet<string> = new Set(['blmpop', 'bzmpop']);

/**
 * A command's keys, and the same command over a subset of them (the other arguments kept):
 * BLPOP k… timeout; BLMPOP timeout numkeys k… LEFT [COUNT n] (numkeys rewritten).
 */
export interface KeyShape {
  /** The key positions in args, in order (contiguous). */
  readonly keys: readonly number[];
  build(positions: readonly number[]): Buffer[];
}

function shapeOf(command: string, args: readonly Buffer[], keys: readonly number[]): KeyShape | null {
  if (keys.length < 2) return null;
  const first = keys[0]!;
  const last = keys[keys.length - 1]!;
  if (last - first + 1 !== keys.length) return null; // not one run of arguments: leave it to the node
  if (NUMKEYS.has(command) && first < 3) return null;
  return {
    keys,
    build(positions) {
      const prefix = args.slice(0, first);
      if (NUMKEYS.has(command)) prefix[first - 1] = Buffer.from(String(positions.length));
      return [...prefix, ...positions.map((p) => args[p]!), ...args.slice(last + 1)];
    },
  };
}

/**
 * Blocking commands over keys in several slots, with Valkey's semantics (one server's):
 *
 *  - BLPOP, BRPOP, BLMPOP, BZPOPMIN, BZPOPMAX, BZMPOP (this file): keys are checked in the
 *    order given and the first non-empty one is popped. The keys are taken in runs of one slot;
 *    each run is tried with the command itself inside MULTI … EXEC on its slot's shared link
 *    (where Valkey does not block: an empty run answers nil at once, a non-empty one pops exactly
 *    as the blocking command would, errors included), in order; runs after the first are skipped
 *    when an EXISTS sent at the start found none of their keys. When every key is empty the
 *    command waits on every slot at once, one leased connection each (blocking-call.ts). The
 *    first value that arrives is the client's; the others are cancelled with CLIENT UNBLOCK, and
 *    a value another slot popped in the same instant is put back where it came from
 *    (put-back.ts): the same end of the list, the same score. The client's later commands wait
 *    until that is done. The command's timeout applies on every slot; the first slot to time out
 *    cancels the others and the client gets nil.
 *  - XREAD / XREADGROUP … BLOCK: stream-reads.ts. BLMOVE / BRPOPLPUSH with source and
 *    destination in different slots: list-move.ts.
 *
 * Returns false for a command it cannot carry out over several slots (the caller answers
 * CROSSSLOT).
 */
export function blockingCrossSlot(session: HandlerSession, req: CommandRequest): boolean {
  const { command, spec } = req;
  if (spec === undefined) return false;
  if (command === 'xread' || command === 'xreadgroup') return streamReadCrossSlot(session, req);
  if (command === 'blmove' || command === 'brpoplpush') {
    const refusal = splitKeyWrite(session, req);
    if (refusal !== null) {
      session.replyNow(encodeError(refusal));
      return true;
    }
    return listMoveCrossSlot(session, req);
  }
  if (!POPS.has(command)) return false;
  const ctx = session.ctx;
  const args = req.args.map((a) => Buffer.from(a)); // kept past this turn
  const shape = shapeOf(command, args, ctx.commands().keyIndexes(spec, args));
  if (shape === null) return false;
  ctx.metrics?.commandCounter(command).inc();
  ctx.metrics?.crossSlotCommands.blocking.inc();
  const timeoutMs = commandTimeoutMs(session, req);
  session.runExclusive(() => {
    const entry = session.reserve();
    // Filled once every slot has answered and what they popped is back: the barrier until then.
    const settled = session.reserve();
    new CrossSlotPop(session, command, args, shape, timeoutMs, entry, settled).start();
  });
  return true;
}

/** Keys of one slot: a run of consecutive keys (phase one), or every key of the slot (phase two). */
interface SlotKeys {
  readonly slot: number;
  readonly positions: number[];
}

/** One pop over several slots, from its first check to its last put-back. */
class CrossSlotPop {
  private calls: BlockingCall[] = [];
  private pending = 0;
  /** The reply the client gets (a value, or an error). */
  private winner: Buffer | null = null;
  private delivered = false;
  /** A slot timed out: the client's timeout has passed. Its nil, as the node wrote it. */
  private nilReply: Buffer | null = null;
  /** The client went away: whatever arrives is put back. */
  private gone = false;
  private readonly putBacks: Array<Promise<void>> = [];
  private readonly fromLeft: boolean;
  /** What the session holds while the slots wait (CLIENT UNBLOCK, close), cleared at the end. */
  private lease: object | null = null;

  constructor(
    private readonly session: HandlerSession,
    private readonly command: string,
    private readonly args: Buffer[],
    private readonly shape: KeyShape,
    private readonly timeoutMs: number | null,
    private readonly entry: ReplyEntry,
    private readonly settled: ReplyEntry,
  ) {
    const last = shape.keys[shape.keys.length - 1]!;
    this.fromLeft = command === 'blpop' || (command === 'blmpop' && args[last + 1]?.toString('latin1').toLowerCase() === 'left');
  }

  start(): void {
    void this.tryEachRun().then(
      (reply) => {
        if (reply === null) return this.block();
        // The client left while its value was popped: back where it came from, not lost.
        if (this.session.closed && reply[0] !== 0x2d) this.putBack(reply);
        this.answer(reply);
      },
      (err: Error) => this.answer(encodeError(`ERR respool: ${err.message}`)),
    );
  }

  /** Phase one: the runs in key order, each popped at once if it can be; null when all were empty. */
  private async tryEachRun(): Promise<Buffer | null> {
    const runs = this.runs();
    const ctx = this.session.ctx;
    // EXISTS of every later run, sent now: a run none of whose keys exists is not popped.
    const probes = runs.slice(1).map((run) => internalCall(ctx.router, this.session, ['EXISTS', ...run.positions.map((p) => this.args[p]!)], run.slot, true));
    for (let i = 0; i < runs.length; i++) {
      if (this.session.closed) return null;
      if (i > 0 && (await probes[i - 1]!).toString('latin1') === ':0\r\n') continue;
      const reply = await this.popNow(runs[i]!);
      if (reply !== null) return reply;
    }
    return null;
  }

  /** The command over one run inside MULTI … EXEC: its reply, or null when it found nothing. */
  private popNow(run: SlotKeys): Promise<Buffer | null> {
    const ctx = this.session.ctx;
    const raw = encodeCommand(this.shape.build(run.positions));
    return new Promise((resolve) => {
      new TransactionBlock(ctx.router, this.session, run.slot, [raw], (outcome) => {
        if (outcome.kind === 'failed') return resolve(encodeError(outcome.error));
        const frame = outcome.reply;
        // EXEC refused (OOM, READONLY …): the reason is what the command itself would get.
        if (frame[0] === 0x2d) return resolve(outcome.queueError !== null ? encodeError(outcome.queueError) : frame);
        let parts: Buffer[] | null = null;
        try {
          parts = splitAggregate(frame);
        } catch {
          parts = null;
        }
        const reply = parts?.[0];
        if (reply === undefined) return resolve(encodeError(`ERR respool: unexpected EXEC reply to ${this.command.toUpperCase()}`));
        resolve(isNilReply(reply) ? null : Buffer.from(reply));
      }).send();
    });
  }

  /** Phase two: the command over each slot's keys on a leased connection of its own, all at once. */
  private block(): void {
    if (this.session.closed) return this.finish();
    const state = this.session.state;
    const groups = this.groups();
    this.pending = groups.length;
    this.calls = groups.map((group, i) => new BlockingCall(this.session, encodeCommand(this.shape.build(group.positions)), this.command, group.slot, this.timeoutMs, (reply) => this.onReply(i, reply)));
    const lease = {
      abandon: () => {
        this.gone = true;
        for (const call of this.calls) call.abandon();
      },
      unblock: async (how: 'timeout' | 'error') => (await Promise.all(this.calls.map((c) => c.unblock(how)))).some((b) => b),
    };
    this.lease = lease;
    state.lease = lease;
    state.block(this.shape.keys.map((p) => this.args[p]!.toString('latin1')), false);
    for (const call of this.calls) call.start();
  }

  private onReply(index: number, reply: Buffer | null): void {
    this.pending--;
    if (reply !== null) {
      if (isNilReply(reply)) {
        if (this.nilReply === null) {
          this.nilReply = reply;
          if (this.winner === null) this.cancelOthers(index); // the timeout has passed everywhere
        }
      } else if (this.winner === null && !this.gone) {
        this.winner = reply;
        if (this.nilReply === null) {
          this.cancelOthers(index);
          this.answer(reply); // at once; later requests still wait for `settled`
        }
      } else if (reply[0] !== 0x2d && reply[0] !== 0x21) {
        this.putBack(reply); // popped in the same instant as the winner's (or after the client left)
      }
    }
    if (this.pending === 0) this.finish();
  }

  private cancelOthers(except: number): void {
    this.calls.forEach((call, i) => {
      if (i !== except) void call.unblock('timeout');
    });
  }

  private putBack(reply: Buffer): void {
    const ctx = this.session.ctx;
    const args = putBackCommand(this.command, reply, this.fromLeft);
    const key = args?.[1];
    if (args === null || key === undefined) {
      ctx.metrics?.crossSlotPutBacks.failed.inc();
      ctx.log.error({ event: 'put_back_failed', command: this.command, reply: reply.toString('latin1', 0, 200) }, 'a value popped by a losing slot could not be put back: its reply is not understood');
      return;
    }
    this.putBacks.push(
      internalCall(ctx.router, this.session, args, calculateSlot(key)).then((result) => {
        if (result[0] !== 0x2d) {
          ctx.metrics?.crossSlotPutBacks.ok.inc();
          return;
        }
        ctx.metrics?.crossSlotPutBacks.failed.inc();
        ctx.log.error({ event: 'put_back_failed', command: this.command, key: String(key), error: result.toString('utf8', 1, result.length - 2) }, 'a value popped by a losing slot could not be put back');
      }),
    );
  }

  private answer(reply: Buffer): void {
    if (this.delivered) return;
    this.delivered = true;
    this.entry.fill(reply);
    if (this.calls.length === 0) this.settled.fill(NO_REPLY); // phase one answered: nothing to wait for
  }

  /** Every slot answered: the client's reply (if not given yet), then the barrier lifts once the put-backs are done. */
  private finish(): void {
    const state = this.session.state;
    if (state.lease === this.lease) state.lease = null;
    if (this.calls.length > 0) state.unblock();
    if (!this.delivered) {
      this.delivered = true;
      this.entry.fill(this.winner ?? this.nilReply ?? nullArray(state.protocol));
    }
    void Promise.all(this.putBacks).then(() => this.settled.fill(NO_REPLY));
  }

  /** Maximal runs of consecutive keys in one slot, in key order. */
  private runs(): SlotKeys[] {
    const out: SlotKeys[] = [];
    for (const p of this.shape.keys) {
      const slot = calculateSlot(this.args[p]!);
      const last = out[out.length - 1];
      if (last !== undefined && last.slot === slot) last.positions.push(p);
      else out.push({ slot, positions: [p] });
    }
    return out;
  }

  /** Every slot's keys, slots in the order they first appear. */
  private groups(): SlotKeys[] {
    const bySlot = new Map<number, SlotKeys>();
    for (const p of this.shape.keys) {
      const slot = calculateSlot(this.args[p]!);
      let group = bySlot.get(slot);
      if (group === undefined) bySlot.set(slot, (group = { slot, positions: [] }));
      group.positions.push(p);
    }
    return [...bySlot.values()];
  }
}
