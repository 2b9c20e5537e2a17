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

  constructor(
    public maxRequests: number, // changed by a reload (UpstreamPools.reconfigure)
    public maxBytes: number,
  ) {}

  /** True when one more request of `size` bytes would pass a bound. */
  full(size: number): boolean {
    return this.requests >= this.maxRequests || this.bytes + size > this.maxBytes;
  }
}
