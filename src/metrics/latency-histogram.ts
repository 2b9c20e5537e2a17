/**
 * A latency histogram cheap enough for every request, in Valkey's own terms.
 *
 * Values are recorded in units of 1024 ns (≈ 1 µs) into log-linear buckets: one per unit below 8,
 * then 8 per power of two (each at most 12.5% wide), up to 2^31 units (≈ 37 minutes; longer values land in the
 * last bucket). Recording is a multiply, a `Math.clz32` and an increment. Octave boundaries fall
 * on 1024·2^k ns, the points where Valkey's LATENCY HISTOGRAM reports its cumulative counts
 * (hdr_iter_log_init(…, 1024, 2) over nanoseconds), so the Valkey layout is read off exactly;
 * percentiles are a bucket's highest value, as hdr_value_at_percentile gives, at most 12.5% above the exact one.
 */
export const BUCKETS = 232;

/** Bucket of `units` (an integer ≥ 0 of 1024 ns). */
function bucketOf(units: number): number {
  if (units < 8) return units;
  if (units >= 0x80000000) return BUCKETS - 1;
  const e = 31 - Math.clz32(units);
  return (e - 2) * 8 + ((units >>> (e - 3)) & 7);
}

/** The first value (in 1024 ns units) above bucket `i`. */
function bucketEnd(i: number): number {
  if (i < 8) return i + 1;
  const e = (i >> 3) + 2;
  return (9 + (i & 7)) * 2 ** (e - 3);
}

const UNITS_PER_MS = 1e6 / 1024;

export class LatencyHistogram {
  readonly counts = new Float64Array(BUCKETS);
  count = 0;

  /** Records one duration in milliseconds. */
  recordMs(ms: number): void {
    const units = ms > 0 ? Math.floor(ms * UNITS_PER_MS) : 0;
    this.counts[bucketOf(units)]!++;
    this.count++;
  }

  add(other: LatencyHistogram): void {
    const a = this.counts;
    const b = other.counts;
    for (let i = 0; i < BUCKETS; i++) a[i]! += b[i]!;
    this.count += other.count;
  }

  reset(): void {
    this.counts.fill(0);
    this.count = 0;
  }

  /**
   * The value (µs) at percentile `p` (0..100): the highest value of the bucket holding it, as
   * hdr_value_at_percentile answers; 0 when empty.
   */
  percentileUs(p: number): number {
    if (this.count === 0) return 0;
    const wanted = Math.max(1, Math.floor((p / 100) * this.count + 0.5)); // hdr_value_at_percentile's rounding
    let seen = 0;
    for (let i = 0; i < BUCKETS; i++) {
      seen += this.counts[i]!;
      if (seen >= wanted) return ((bucketEnd(i) * 1024 - 1) / 1000);
    }
    return (bucketEnd(BUCKETS - 1) * 1024 - 1) / 1000;
  }

  /**
   * Valkey's LATENCY HISTOGRAM `histogram_usec` (latency.c fillCommandCDF): for each power of
   * two from 1024 ns, the value Valkey prints for it (hdr's highest equivalent value at 2
   * significant digits, in µs) and how many values lie below it, listed only where the count
   * grew.
   */
  valkeyCdf(): Array<[number, number]> {
    const out: Array<[number, number]> = [];
    let cumulative = 0;
    let previous = 0;
    let bucket = 0;
    for (let k = 0; cumulative < this.count && k <= 31; k++) {
      // at 1024·2^k ns: every value below 2^k units
      const limit = 2 ** k;
      while (bucket < BUCKETS && bucketEnd(bucket) <= limit) cumulative += this.counts[bucket++]!;
      if (cumulative > previous) out.push([valkeyLabel(1024 * limit), cumulative]);
      previous = cumulative;
    }
    return out;
  }
}

/** hdr's highest equivalent value of `ns` at 2 significant digits (ranges of 2^(log2 ns − 7) ns), in whole µs. */
function valkeyLabel(ns: number): number {
  const range = 2 ** Math.max(0, Math.floor(Math.log2(ns)) - 7);
  return Math.floor((ns + range - 1) / 1000);
}
