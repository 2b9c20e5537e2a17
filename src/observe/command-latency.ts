import type { CommandSpec } from '../commands/command-table.js';
import { LatencyHistogram } from '../metrics/latency-histogram.js';

/** A command's histogram, cached on its spec for the tracker that made it (several proxies may share a table in one process). */
interface CachedHistogram extends LatencyHistogram {
  owner?: CommandLatency;
}

/** Valkey's latency-tracking-info-percentiles default. */
export const INFO_PERCENTILES = [50, 99, 99.9] as const;

/**
 * Per-command latency histograms as respool's clients see it (receive → reply written), for
 * LATENCY HISTOGRAM and INFO latencystats in Valkey's formats: since start (or CONFIG RESETSTAT),
 * by the command's full name ("client|list"), as Valkey's latency-tracking keeps them. The
 * histogram is cached on the spec, so recording costs a property read and the histogram's own
 * few operations (latency-histogram.ts).
 */
export class CommandLatency {
  private readonly byName = new Map<string, CachedHistogram>();

  constructor(
    /** latency.tracking (CONFIG SET latency-tracking): off, nothing is recorded (Valkey's latency-tracking no). */
    public enabled: boolean,
  ) {}

  recordMs(spec: CommandSpec, ms: number): void {
    let h = spec.latency as CachedHistogram | undefined;
    if (h === undefined || h.owner !== this) h = this.attach(spec);
    h.recordMs(ms);
  }

  private attach(spec: CommandSpec): CachedHistogram {
    let h = this.byName.get(spec.name);
    if (h === undefined) {
      h = new LatencyHistogram() as CachedHistogram;
      h.owner = this;
      this.byName.set(spec.name, h);
    }
    spec.latency = h;
    return h;
  }

  /** Commands with data, by full name. */
  entries(): Array<[string, LatencyHistogram]> {
    return [...this.byName].filter(([, h]) => h.count > 0);
  }

  get(name: string): LatencyHistogram | undefined {
    const h = this.byName.get(name);
    return h !== undefined && h.count > 0 ? h : undefined;
  }

  /** CONFIG RESETSTAT. */
  reset(): void {
    for (const h of this.byName.values()) h.reset();
  }

  /** INFO latencystats lines (`latency_percentiles_usec_<cmd>:p50=…,p99=…,p99.9=…`). */
  infoLines(): string[] {
    return this.entries().map(([name, h]) => `latency_percentiles_usec_${name}:${INFO_PERCENTILES.map((p) => `p${p}=${h.percentileUs(p).toFixed(3)}`).join(',')}`);
  }
}
