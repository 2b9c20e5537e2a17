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

/** The last limits resolved: handed out again while the same values are asked for. */
let last: FramerLimits | null = null;

/**
 * Fills in defaults; rejects values that are not non-negative safe integers (a config bug). The
 * result is frozen and shared: asked for the same values as last time (every client session's
 * framer asks with config.limits; a reload that changes them makes a new one), it is the same
 * object, so a new session allocates no limits of its own.
 */
export function resolveLimits(partial?: Partial<FramerLimits>): FramerLimits {
  const maxBulkLength = partial?.maxBulkLength ?? DEFAULT_FRAMER_LIMITS.maxBulkLength;
  const maxArrayLength = partial?.maxArrayLength ?? DEFAULT_FRAMER_LIMITS.maxArrayLength;
  const maxInlineLength = partial?.maxInlineLength ?? DEFAULT_FRAMER_LIMITS.maxInlineLength;
  const maxNestingDepth = partial?.maxNestingDepth ?? DEFAULT_FRAMER_LIMITS.maxNestingDepth;
  const l = last;
  if (l !== null && l.maxBulkLength === maxBulkLength && l.maxArrayLength === maxArrayLength && l.maxInlineLength === maxInlineLength && l.maxNestingDepth === maxNestingDepth) {
    return l;
  }
  const out: FramerLimits = { maxBulkLength, maxArrayLength, maxInlineLength, maxNestingDepth };
  for (const [name, value] of Object.entries(out)) {
    if (!Number.isSafeInteger(value) || value < 0) {
      throw new RangeError(`framer limit ${name} must be a non-negative integer (got ${String(value)})`);
    }
  }
  last = Object.freeze(out);
  return out;
}
