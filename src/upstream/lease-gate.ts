import { FifoQueue } from '../util/fifo-queue.js';

/**
 * The process-wide bound on leased connections (dedicated.maxTotal), the one thing
 * LeasePools decides beside its per-node generic-pools (which own their own bound, queue and
 * acquire timeout). A dial takes a place before it starts and gives it back when its connection
 * is destroyed; dials past the bound wait here, oldest first.
 *
 *   used    : connections dialing, idle or leased, over every pool ≤ max() (read at use: a reload
 *             may change it)
 *   waiting : dials waiting for a place, in the order they asked; `grant` runs when one is free
 */
export class LeaseGate {
  used = 0;
  private readonly waiting = new FifoQueue<() => void>();
  private closed = false;

  constructor(private readonly max: () => number) {}

  /** Dials waiting for a place. */
  get queued(): number {
    return this.waiting.length;
  }

  /** Takes a place now, or runs `grant` once one is free (false: none now, queued). Once closed, at once. */
  take(grant: () => void): boolean {
    if (this.closed || (this.waiting.length === 0 && this.used < this.max())) {
      this.used++;
      return true;
    }
    this.waiting.push(grant);
    return false;
  }

  /** A connection was destroyed (or a dial given up): its place goes to the oldest waiting dial. */
  give(): void {
    this.used--;
    this.admit();
  }

  /** Grants waiting dials while there is room (after give, or when max() grew). */
  admit(): void {
    while (!this.closed && this.waiting.length > 0 && this.used < this.max()) {
      this.used++;
      this.waiting.shift()!();
    }
  }

  /** Closing: the bound no longer applies — every dial goes ahead at once, to open a connection closed at once. */
  close(): void {
    this.closed = true;
    for (const grant of this.waiting.drain()) {
      this.used++;
      grant();
    }
  }
}
