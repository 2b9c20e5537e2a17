import type { Registry } from 'prom-client';

/**
 * A histogram with one label, observed on the hot path (every upstream reply), exported in
 * prom-client's format at scrape time.
 *
 * Why not prom-client's Histogram: its child.observe() hashes the label set on every call;
 * `node --cpu-prof` under valkey-benchmark put it at 2–4% of respool's CPU. Here a series
 * is a plain object with a Float64Array of bucket counts: observe() is a short loop over the
 * bucket bounds and three additions. Registered through registry.registerMetric(), which only
 * needs name/help/type/get()/reset().
 */
export interface HistogramSeries {
  observe(value: number): void;
}

class Series implements HistogramSeries {
  readonly counts: Float64Array;
  sum = 0;
  count = 0;

  constructor(private readonly bounds: readonly number[]) {
    this.counts = new Float64Array(bounds.length); // non-cumulative; +Inf is count
  }

  observe(value: number): void {
    const bounds = this.bounds;
    for (let i = 0; i < bounds.length; i++) {
      if (value <= bounds[i]!) {
        this.counts[i]!++;
        break;
      }
    }
    this.sum += value;
    this.count++;
  }
}

export class LabeledHistogram {
  readonly type = 'histogram' as const;
  readonly aggregator = 'sum' as const;
  private readonly series = new Map<string, Series>();

  constructor(
    readonly name: string,
    readonly help: string,
    private readonly labelName: string,
    private readonly bounds: readonly number[],
    registers: Registry[] = [],
  ) {
    for (const registry of registers) registry.registerMetric(this as never);
  }

  /** The series for one label value (cached; keep it). */
  labels(value: string): HistogramSeries {
    let series = this.series.get(value);
    if (series === undefined) {
      series = new Series(this.bounds);
      this.series.set(value, series);
    }
    return series;
  }

  remove(value: string): void {
    this.series.delete(value);
  }

  reset(): void {
    this.series.clear();
  }

  /** prom-client's MetricObjectWithValues shape. */
  async get(): Promise<{ name: string; help: string; type: 'histogram'; aggregator: 'sum'; values: Array<{ value: number; labels: Record<string, string | number>; metricName: string }> }> {
    const values: Array<{ value: number; labels: Record<string, string | number>; metricName: string }> = [];
    for (const [labelValue, s] of this.series) {
      let cumulative = 0;
      for (let i = 0; i < this.bounds.length; i++) {
        cumulative += s.counts[i]!;
        values.push({ value: cumulative, labels: { le: this.bounds[i]!, [this.labelName]: labelValue }, metricName: `${this.name}_bucket` });
      }
      values.push({ value: s.count, labels: { le: '+Inf', [this.labelName]: labelValue }, metricName: `${this.name}_bucket` });
      values.push({ value: s.sum, labels: { [this.labelName]: labelValue }, metricName: `${this.name}_sum` });
      values.push({ value: s.count, labels: { [this.labelName]: labelValue }, metricName: `${this.name}_count` });
    }
    return { name: this.name, help: this.help, type: 'histogram', aggregator: 'sum', values };
  }
}
