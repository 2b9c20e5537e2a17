/** A waiter as a key's queue sees it: gone from every queue at once once `done`. */
export interface Queued {
  readonly done: boolean;
}

/**
 * The clients waiting on one key of one database, first come first served (Valkey's order), and
 * what respool knows of the key on its node.
 *
 *   order      `list` holds waiters in arrival order; a waiter is in it once.
 *   removal    lazy: a waiter that is `done` stays in `list` until the front passes it or the
 *              list is compacted (more than half of it done); `live` counts the others.
 *   next       the same key name in another database (rare): a node's invalidation names keys
 *              only, so the chain is walked for each.
 *   drain      at most one at a time (`running`); a change heard while it runs sets `again`.
 *   readySeq   when its running drain started: a waiter in several queues is tried by the queue
 *              that became ready first (Valkey serves ready keys in the order they became ready).
 */
export class KeyQueue<W extends Queued> {
  private list: W[];
  private front = 0;
  /** Waiters in the queue that are not done. */
  live = 0;
  /** Same name, another database. */
  next: KeyQueue<W> | null = null;
  /** Where the key is registered now (a watch's address), or null. */
  node: string | null = null;
  /** The drain running now, settled when it ends. */
  running: Promise<void> | null = null;
  /** The key changed while the drain ran: once more. */
  again = false;
  /** The order in which keys became ready (a drain started): an earlier one serves a waiter it shares first. */
  readySeq = 0;
  /** Changes heard so far (a waiter's first check compares it before and after). */
  changes = 0;
  /** When respool heard of the change being served (the wake latency), or 0. */
  changedAt = 0;

  constructor(
    readonly db: number,
    /** The key as latin1 (binary-safe) text: the map's key and, as bytes again, the commands'. */
    readonly name: string,
    readonly slot: number,
    first: W,
  ) {
    this.list = [first]; // most keys have one waiter: an array of one, not push()'s sixteen slots
    this.live = 1;
  }

  get key(): Buffer {
    return Buffer.from(this.name, 'latin1');
  }

  add(waiter: W): void {
    this.list.push(waiter);
    this.live++;
  }

  /** A waiter of this queue became done. */
  removed(): void {
    this.live--;
    while (this.front < this.list.length && this.list[this.front]!.done) this.front++;
    if (this.front === this.list.length) {
      this.list.length = 0;
      this.front = 0;
    } else if (this.front > 16 && this.front * 2 > this.list.length) {
      this.list = this.list.slice(this.front);
      this.front = 0;
    } else if (this.list.length > 32 && this.live * 2 < this.list.length) {
      this.list = this.list.filter((w) => !w.done);
      this.front = 0;
    }
  }

  /** The first waiter not done that is `eligible`. */
  first(eligible: (w: W) => boolean): W | null {
    for (let i = this.front; i < this.list.length; i++) {
      const w = this.list[i]!;
      if (!w.done && eligible(w)) return w;
    }
    return null;
  }

  /** The waiters not done, in order. */
  *waiters(): Generator<W> {
    for (let i = this.front; i < this.list.length; i++) if (!this.list[i]!.done) yield this.list[i]!;
  }
}
