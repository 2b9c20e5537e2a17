import { Backoff } from '../upstream/backoff.js';

/**
 * Keys whose node could not be asked (down, failing over, a slot moving): tried again together
 * after one full-jitter backoff (upstream/backoff.ts), capped; the backoff starts over once
 * nothing waits for a retry — not when some other key's drain went well, so a dead node's keys
 * are not tried every 100 ms while the rest of the cluster is fine.
 */
export class RetryLater<T> {
  private readonly due = new Set<T>();
  private timer: NodeJS.Timeout | null = null;
  private readonly backoff = new Backoff(100, 2_000);

  constructor(private readonly retry: (item: T) => void) {}

  add(item: T): void {
    this.due.add(item);
    if (this.timer !== null) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      const now = [...this.due];
      this.due.clear();
      for (const x of now) this.retry(x);
    }, this.backoff.nextDelayMs());
    this.timer.unref();
  }

  delete(item: T): void {
    this.due.delete(item);
  }

  /** A drain went well: the backoff starts over if nothing else waits. */
  settled(): void {
    if (this.due.size === 0 && this.timer === null) this.backoff.reset();
  }

  close(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    this.due.clear();
  }
}
