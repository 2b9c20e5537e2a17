/**
 * Requests (and their bytes) written to upstream links and not yet answered, summed over every
 * link of the process: the per-process bound of design invariant 3. Links add on write and
 * subtract on reply or failure; NodePool refuses (sheds) a request that would pass a bound.
 */
export class ProcessLoad {
  requests = 0;
  bytes = 0;

  constructor(
    readonly maxRequests: number,
    readonly maxBytes: number,
  ) {}

  /** True when one more request of `size` bytes would pass a bound. */
  full(size: number): boolean {
    return this.requests >= this.maxRequests || this.bytes + size > this.maxBytes;
  }
}
