/** Bounds that keep a misbehaving peer from making a framer buffer or recurse without limit. */
export interface FramerLimits {
  /** Largest bulk string accepted, in bytes (Valkey's proto-max-bulk-len, default 512 MiB). */
  maxBulkLength: number;
  /** Most elements in one request array; replies use the same bound per aggregate. */
  maxArrayLength: number;
  /** Longest inline command line (Valkey's PROTO_INLINE_MAX_SIZE, 64 KiB). */
  maxInlineLength: number;
  /** Deepest aggregate nesting in a reply (requests are flat). */
  maxNestingDepth: number;
}

/**
 * Upstream replies are framed to any depth: the framer keeps an explicit stack (no recursion), a
 * script may legitimately return a reply nested thousands deep, and refusing it would tear down a
 * link other clients' requests are on. The reply's size is what bounds it.
 */
export const UNBOUNDED_NESTING = Number.MAX_SAFE_INTEGER;

export const DEFAULT_FRAMER_LIMITS: FramerLimits = Object.freeze({
  maxBulkLength: 512 * 1024 * 1024,
  maxArrayLength: 1_048_576,
  maxInlineLength: 64 * 1024,
  maxNestingDepth: 128,
});

/** Objects resolveLimits returned (frozen): passed back in, they are used as they are. */
const resolved = new WeakSet<FramerLimits>();

/**
 * Fills in defaults; rejects values that are not non-negative safe integers (a config bug). The
 * result is frozen and may be shared: a framer given one keeps it without another copy (every
 * client session's framer shares one per config, see session/client-session.ts).
 */
export function resolveLimits(partial?: Partial<FramerLimits>): FramerLimits {
  if (partial !== undefined && resolved.has(partial as FramerLimits)) return partial as FramerLimits;
  const out: FramerLimits = {
    maxBulkLength: partial?.maxBulkLength ?? DEFAULT_FRAMER_LIMITS.maxBulkLength,
    maxArrayLength: partial?.maxArrayLength ?? DEFAULT_FRAMER_LIMITS.maxArrayLength,
    maxInlineLength: partial?.maxInlineLength ?? DEFAULT_FRAMER_LIMITS.maxInlineLength,
    maxNestingDepth: partial?.maxNestingDepth ?? DEFAULT_FRAMER_LIMITS.maxNestingDepth,
  };
  for (const [name, value] of Object.entries(out)) {
    if (!Number.isSafeInteger(value) || value < 0) {
      throw new RangeError(`framer limit ${name} must be a non-negative integer (got ${String(value)})`);
    }
  }
  Object.freeze(out);
  resolved.add(out);
  return out;
}
