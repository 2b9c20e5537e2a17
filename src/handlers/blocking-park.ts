import { clockNow } from '../util/read-clock.js';
import { timeoutReply, UNBLOCKED } from './blocking-call.js';
import type { ParkListener, ParkTicket } from '../parking/parked-pops.js';
import type { ReplyEntry } from '../client/reply-queue.js';
import type { CommandRequest, HandlerSession } from '../client/handler-session.js';

/**
 * A list or sorted-set blocking pop over keys of one slot, parked at respool (parking/parked-pops.ts):
 * tried at once, and when there is nothing to pop the client waits in the queue of each of its
 * keys, with no connection of its own on the node.
 *
 *  - Barrier: as on a leased connection, the command starts once the client's earlier replies are
 *    written and its later pipelined commands wait behind its reply (Valkey runs nothing of a
 *    blocked client's).
 *  - Timeout: kept here, per client; at its end the client gets Valkey's timeout reply (a null
 *    array, RESP3 null) unless a pop on its way brings a value first.
 *  - CLIENT UNBLOCK: the same, with -UNBLOCKED for ERROR; CLIENT KILL and a client that goes:
 *    it leaves the queues, and a value popped for it meanwhile is put back.
 *  - INFO blocked_clients and CLIENT LIST flags=b count it once its command found nothing to pop
 *    (not while the command is tried), as Valkey counts a client once its command blocked.
 */
export function parkedPop(session: HandlerSession, req: CommandRequest, slot: number, keyIndexes: readonly number[], timeoutMs: number | null): void {
  const { command } = req;
  const raw = Buffer.from(req.raw);
  // BLMOVE / BRPOPLPUSH wait on their source; the destination only receives.
  const waitOn = command === 'blmove' || command === 'brpoplpush' ? keyIndexes.slice(0, 1) : keyIndexes;
  const keys = waitOn.map((i) => req.args[i]!.toString('latin1'));
  session.runExclusive(() => new ParkedClient(session, command, raw, keys, slot, timeoutMs));
}

/**
 * One parked client as its session sees it: its reply entry, its timer, what CLIENT UNBLOCK and
 * the client's going do (ClientState.lease). One object, no closures: thousands wait at once.
 */
class ParkedClient implements ParkListener {
  private readonly entry: ReplyEntry;
  private readonly ticket: ParkTicket;
  private readonly parkedAt = clockNow();
  private timer: NodeJS.Timeout | null = null;
  private finished = false;
  /** Its keys as INFO's blocking keys name them. */
  private readonly keys: readonly string[];

  constructor(
    private readonly session: HandlerSession,
    command: string,
    raw: Buffer,
    keys: readonly string[],
    private readonly slot: number,
    timeoutMs: number | null,
  ) {
    const { ctx, state } = session;
    this.entry = session.reserve();
    this.entry.keepRequestAs(raw); // not the read buffer it arrived in: it may wait for hours
    ctx.metrics?.commandCounter(command).inc();
    state.lease = this;
    this.keys = keys;
    this.ticket = ctx.parking.park({ client: session, command, raw, keys, slot }, this); // the same strings as INFO's blocked keys
    if (timeoutMs !== null) this.timer = setTimeout(() => void this.unblock('timeout'), timeoutMs);
  }

  /** Its command found nothing: INFO clients and CLIENT LIST count it as blocked from now (as Valkey, not while its command is tried). */
  waiting(): void {
    if (!this.finished) this.session.state.block(this.keys, false);
  }

  served(reply: Buffer): void {
    if (this.finished) return;
    this.finished = true;
    if (this.timer !== null) clearTimeout(this.timer);
    const { ctx, state } = this.session;
    if (state.lease === this) state.lease = null;
    state.unblock();
    // Its wait is left out of the slow log, as Valkey times only what a blocked command ran.
    this.entry.upstreamTimed(ctx.router.primaryFor(this.slot)?.address ?? '', clockNow() - this.parkedAt);
    this.entry.fill(reply);
  }

  abandon(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.ticket.abandon();
  }

  async unblock(how: 'timeout' | 'error'): Promise<boolean> {
    if (this.finished || !(await this.ticket.cancel())) return false;
    this.served(how === 'timeout' ? timeoutReply(this.session.state.protocol) : UNBLOCKED);
    return true;
  }
}
