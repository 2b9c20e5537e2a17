// The ledger of bench/soak.mjs's load process: what was acknowledged (and when), what was
// popped and received, every error with its time, every wrong value. Compact over an hour: one
// 32-bit word per acknowledged key (the time it was acknowledged, in ms since the load started,
// + 1; 0 = not acknowledged), and each key's value is a function of its name, so no
// value is kept.
export const MODES = ['verified', 'multi', 'blpop', 'pubsub', 'mget', 'perRequest'];

/** A growable typed array whose unset entries read 0. */
export class Grow {
  constructor(Type = Uint32Array) {
    this.Type = Type;
    this.a = new Type(1024);
    this.length = 0;
  }

  get(i) {
    return i < this.a.length ? this.a[i] : 0;
  }

  set(i, v) {
    if (i >= this.a.length) {
      let size = this.a.length;
      while (size <= i) size *= 2;
      const b = new this.Type(size);
      b.set(this.a);
      this.a = b;
    }
    this.a[i] = v;
    if (i >= this.length) this.length = i + 1;
  }

  inc(i) {
    this.set(i, this.get(i) + 1);
  }
}

/** Error text without its numbers (ports, ids, counts), so errors of one kind count together. */
export const errorKind = (e) => String(e?.message ?? e).split('\n')[0].replace(/\d+/g, 'N').slice(0, 110);

const MAX_ERRORS_KEPT = 300_000;

export class Ledger {
  constructor(runId) {
    this.runId = runId;
    this.t0 = Date.now();
    this.ops = Object.fromEntries(MODES.map((m) => [m, 0]));
    this.errorCount = Object.fromEntries(MODES.map((m) => [m, 0]));
    this.mismatchCount = Object.fromEntries(MODES.map((m) => [m, 0]));
    /** [epoch ms, mode, kind] of each error (the first MAX_ERRORS_KEPT). */
    this.errors = [];
    /** The first mismatches in full: { at, mode, detail }. */
    this.mismatches = [];
    /** Key families whose acknowledged writes are read back at the end. */
    this.families = [];
  }

  /** Now, as stored in an acknowledgement entry. */
  stamp() {
    return Date.now() - this.t0 + 1;
  }

  /** Epoch ms of a stamp. */
  at(stamp) {
    return this.t0 + stamp - 1;
  }

  ok(mode, n = 1) {
    this.ops[mode] += n;
  }

  error(mode, e) {
    this.errorCount[mode]++;
    if (this.errors.length < MAX_ERRORS_KEPT) this.errors.push([Date.now(), mode, errorKind(e)]);
  }

  mismatch(mode, detail) {
    this.mismatchCount[mode]++;
    if (this.mismatches.length < 50) this.mismatches.push({ at: Date.now(), mode, detail: String(detail).slice(0, 300) });
  }

  /**
   * A family of keys `keyOf(n)` with values `valueOf(n)`, written by one client of `mode`;
   * returns its acknowledgements (Grow: stamp + 0 per n).
   */
  family(name, mode, keyOf, valueOf) {
    const acked = new Grow(Uint32Array);
    this.families.push({ name, mode, keyOf, valueOf, acked });
    return acked;
  }

  /** Counters so far, for the parent's progress chart. */
  progress() {
    return { t: Date.now(), ops: { ...this.ops }, errors: { ...this.errorCount } };
  }
}
