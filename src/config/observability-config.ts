// What operators look at (src/observe): respool's own slow log and command log, latency tracking,
// node saturation, big keys. Their numeric settings are in schema.ts's NUMERIC_FIELDS like every
// other; this file holds the types, the defaults and the two switches (booleans).

export interface SlowlogConfig {
  /** Requests slower than this at respool (receive → reply written) are logged; -1 off, 0 every request and each command a script calls, at 0 µs (Valkey's slowlog-log-slower-than). */
  thresholdUs: number;
  /** Entries kept (Valkey's slowlog-max-len); 0 off. */
  maxLen: number;
}

export interface CommandlogConfig {
  /** Requests of at least this many bytes are logged as large-request; -1 off (Valkey 8.1's commandlog-request-larger-than). */
  largeRequestBytes: number;
  largeRequestMaxLen: number;
  /** Replies of at least this many bytes are logged as large-reply; -1 off (commandlog-reply-larger-than). */
  largeReplyBytes: number;
  largeReplyMaxLen: number;
}

export interface LatencyConfig {
  /** Per-command histograms for LATENCY HISTOGRAM and INFO latencystats (Valkey's latency-tracking). */
  tracking: boolean;
}

export interface SaturationConfig {
  /** A node whose upstream p99 over the last minute is above this is saturated. */
  p99Ms: number;
  /** … or whose main thread used more than this share of a core between two INFO cpu samples. */
  cpuPercent: number;
  /** How often each node's INFO cpu is read; 0 = never (p99 only). */
  cpuSampleMs: number;
}

export interface BigKeysConfig {
  /** Reply sizes of the hot-key sampler's sampled requests feed a top-k by bytes (RESPOOL BIGKEYS, /bigkeys). */
  enabled: boolean;
  /** Keys reported (and kept). */
  topK: number;
}

export const DEFAULT_SLOWLOG: SlowlogConfig = { thresholdUs: 10_000, maxLen: 128 };
export const DEFAULT_COMMANDLOG: CommandlogConfig = { largeRequestBytes: 1_048_576, largeRequestMaxLen: 128, largeReplyBytes: 1_048_576, largeReplyMaxLen: 128 };
export const DEFAULT_LATENCY: LatencyConfig = { tracking: true };
export const DEFAULT_SATURATION: SaturationConfig = { p99Ms: 10, cpuPercent: 90, cpuSampleMs: 10_000 };
export const DEFAULT_BIG_KEYS: BigKeysConfig = { enabled: true, topK: 10 };

/** The switches: group → its boolean settings (schema.ts adds them to the groups' schemas). */
export const OBSERVABILITY_SWITCHES: Readonly<Record<string, readonly string[]>> = { latency: ['tracking'], bigKeys: ['enabled'] };
