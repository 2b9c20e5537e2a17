/**
 * Requests (and their bytes) written to upstream links and not yet answered, summed over every
 * link of the process: the per-process bound of design invariant 3. Links add on write and
 * subtract on reply or failure; NodePool refuses (sheds) a request that would pass a bound.
 */
export class ProcessLoad {
  requests = 0;
  bytes = 0;
  /** Totals since start (respool_upstream_{sent,received}_bytes_total). */
  sentBytes = 0;
  receivedBytes = 0;
  /** Requests written, and the reads (chunks) that brought replies (respool_upstream_io_total). */
  sentRequests = 0;
  reads = 0;
  /** Write batches of links closed so far (writes(): these plus the open links'). */
  closedWrites = 0;
  /** Open links' writers, for their batch counts. */
  readonly writers = new Set<{ readonly batches: number }>();

  /** Write batches on every shared link so far. */
  writes(): number {
    let n = this.closedWrites;
    for (const w of this.writers) n += w.batches;
    return n;
  }

  constructor(
    public maxRequests: number, // changed by a reload (UpstreamPools.reconfigure)
    public maxBytes: number,
  ) {}

  /** True when one more request of `size` bytes would pass a bound. */
  full(size: number): boolean {
    return this.requests >= this.maxRequests || this.bytes + size > this.maxBytes;
  }
}
