import type { CallClient } from '../routing/upstream-call.js';
import type { KeyQueue } from './key-queue.js';

/** Who hears a parked client's one reply (a value or an error). */
export interface ParkListener {
  /** Its command found nothing to pop: it waits from now on (Valkey counts a client as blocked once its command blocked). */
  waiting(): void;
  served(reply: Buffer): void;
}

/** A parked client as its handler holds it. */
export interface ParkTicket {
  /**
   * Ends the wait (the client's timeout, CLIENT UNBLOCK): true when the client was still waiting
   * and now is not — it then gets no value; false when a value (or an error) reached it first.
   * A pop on its way is waited for, never raced.
   */
  cancel(): Promise<boolean>;
  /** The client went away: it leaves every queue; a value popped for it meanwhile is put back. */
  abandon(): void;
}

const DONE = 1;
const GONE = 2;

/** What a waiter asks of the queues that hold it. */
export interface WaiterOwner {
  leave(waiter: Waiter): void;
}

/**
 * One parked client: its blocking command (as the node reads it) and where it waits. Kept small —
 * thousands wait at once: the request's bytes only (its arguments are read from them again when
 * it is served), the queues it is in, three flags.
 */
export class Waiter implements ParkTicket {
  queues: Array<KeyQueue<Waiter>> = [];
  /** A pop for this client (or a value going back) is on its way to the node. */
  inflight: Promise<void> | null = null;
  /** Its first check (what the command gives when it arrives) is running: drains wait for it rather than try it. */
  checking: Promise<void> | null = null;
  /** DONE | GONE, one field for two flags (thousands of waiters). */
  private flags = 0;

  constructor(
    readonly client: CallClient,
    /** Lower case: blpop, brpop, blmove, brpoplpush, blmpop, bzpopmin, bzpopmax, bzmpop. */
    readonly command: string,
    /** The blocking command itself (a copy): inside MULTI … EXEC the node runs it without blocking. */
    readonly raw: Buffer,
    readonly slot: number,
    readonly listener: ParkListener,
    private readonly owner: WaiterOwner,
  ) {}

  /** It left every queue (served, cancelled or gone). */
  get done(): boolean {
    return (this.flags & DONE) !== 0;
  }

  set done(on: boolean) {
    this.flags = on ? this.flags | DONE : this.flags & ~DONE;
  }

  /** The client went away. */
  get gone(): boolean {
    return (this.flags & GONE) !== 0;
  }

  async cancel(): Promise<boolean> {
    while (this.checking !== null || this.inflight !== null) await (this.checking ?? this.inflight);
    if (this.done) return false;
    this.owner.leave(this);
    return true;
  }

  abandon(): void {
    this.flags |= GONE;
    if (!this.done && this.inflight === null && this.checking === null) this.owner.leave(this);
  }
}
