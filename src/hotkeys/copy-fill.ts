import { nodeCrypto } from '../util/lazy-builtins.js';
import type { Logger } from 'pino';
import type { Metrics } from '../metrics/metrics.js';
import type { SplitFillOutcome } from '../metrics/metric-definitions.js';
import type { FleetState } from '../fleet/fleet-state.js';
import type { FleetStore } from '../fleet/fleet-store.js';
import { displayKey } from './detector.js';
import type { SplitKey } from './split-key.js';

/**
 * Filling a split key's copies from its original — DUMP + PTTL of the original, RESTORE …
 * REPLACE on each copy — while no write to the key can run in between: writes that arrive are
 * held (parked, in order) and sent once the fill is over, and the fill starts only once the
 * writes already in flight have been answered. So a fill never puts back an older value over a
 * newer write, and after it every copy equals the original. The fill's start plus
 * hotKeys.maxCopyAge is how long reads may use the copies (SplitKey.readableUntil): past it they
 * go to the original until the next fill, which a read asks for ahead of time.
 *
 * One instance (no fleet state): the holds are this process's own.
 *
 * A fleet (cluster.fleetState): every member writes the copies, so every member must hold. The
 * filler takes the key's lock in the upstream (one fill at a time), publishes `hold` on the
 * fleet bus, and waits for `held` from every member that is not stale (fleet-state.ts): a member
 * answers only when it knows the key as split under the same copy names, its lease holds, its
 * writes to the key are answered and a barrier on its links to the original's node has passed
 * (nothing it sent before it knew the split is still on its way). A missing answer aborts the
 * fill (`release`): reads stay on the original, nothing goes stale. Members stop reading the
 * copies at `hold` and read them again only after `filled`, for maxCopyAge from the hold. The
 * filler sends no RESTORE later than RESTORE_DEADLINE_MS after `hold`, and a member drops a hold
 * it was not told the end of after HOLD_MAX_MS, so a late RESTORE cannot land after a write a
 * member let through; and a member that registered during the fill (it did not hold) makes the
 * filler abort, since its writes could have raced the fill.
 */

/** Writes parked behind one key's holds at most; past it a write gets TRYAGAIN. */
export const MAX_PARKED = 10_000;
/** Longest a member holds writes for a fill it was not told the end of. */
const HOLD_MAX_MS = 2_000;
/** How long the filler waits for every member's `held`. */
const HOLD_ACK_MS = 500;
/** No RESTORE leaves the filler later than this after `hold` (well before HOLD_MAX_MS). */
const RESTORE_DEADLINE_MS = 1_000;
/** A fill's lock in the upstream, longer than any fill can take. */
const LOCK_MS = 3_000;
/** A member waits this long at most for its in-flight writes before answering `held`. */
const DRAIN_MS = 500;
/** Asked again for the same key at most this often from one instance. */
const ASK_INTERVAL_MS = 250;

/** What the fills need from the hot-key manager. */
export interface FillHost {
  /** The split key whose original has this id (latin1), materialized if a rule covers it; null if none. */
  splitFor(id: string): SplitKey | null;
  /** Writes parked behind a key's holds are sent (its holds are over). */
  releaseParked(split: SplitKey): void;
  /** A control command on the primary serving `slot`; the decoded reply (an error reply throws). */
  call(slot: number, args: Array<string | Buffer | number>): Promise<unknown>;
  /** Resolves once every request sent before now to the node of the original's slot is answered. */
  barrier(split: SplitKey): Promise<void>;
  /** hotKeys.maxCopyAge (0: no bound). */
  maxCopyAge(): number;
}

export interface FleetFillDeps {
  state: FleetState;
  store: FleetStore;
}

export class CopyFills {
  private readonly running = new Set<string>();
  private readonly heldWaiters = new Map<string, (member: string) => void>();
  private readonly holdTimers = new Map<string, NodeJS.Timeout>();
  private stopped = false;
  readonly stats = { ok: 0, aborted: 0, failed: 0 };

  constructor(
    private readonly host: FillHost,
    private readonly fleet: FleetFillDeps | null,
    private readonly log: Logger,
    private readonly metrics?: Metrics,
  ) {
    if (fleet === null) return;
    const { state } = fleet;
    state.on('hold', (m) => void this.onHold(m));
    state.on('held', (m) => this.heldWaiters.get(String(m['id']))?.(String(m['m'])));
    state.on('filled', (m) => this.onEnd(m, true));
    state.on('release', (m) => this.onEnd(m, false));
  }

  stop(): void {
    this.stopped = true;
    for (const t of this.holdTimers.values()) clearTimeout(t);
  }

  /** A fill of `split` soon, unless one ran or was asked for from here moments ago. */
  ask(split: SplitKey, now = Date.now()): void {
    if (this.stopped || this.running.has(split.id) || now - split.fillAskedAt < ASK_INTERVAL_MS) return;
    split.fillAskedAt = now;
    void this.fill(split);
  }

  /** Fills `split`'s copies now (one fill per key at a time from this instance). */
  async fill(split: SplitKey): Promise<SplitFillOutcome | 'busy'> {
    if (this.running.has(split.id) || split.active.length <= 1) return 'busy';
    this.running.add(split.id);
    try {
      const outcome = this.fleet === null ? await this.localFill(split) : await this.fleetFill(split, this.fleet);
      if (outcome !== 'busy') {
        this.stats[outcome]++;
        this.metrics?.raw.split_fills_total.labels(outcome).inc();
      }
      return outcome;
    } finally {
      this.running.delete(split.id);
    }
  }

  /** Writes to `split` wait while it is held; false when too many already wait (the caller answers TRYAGAIN). */
  park(split: SplitKey, send: () => void): boolean {
    if (split.parked.length >= MAX_PARKED) return false;
    split.parked.push(send);
    return true;
  }

  // ---- one instance -----------------------------------------------------------------------------

  private async localFill(split: SplitKey): Promise<SplitFillOutcome> {
    const id = nodeCrypto().randomBytes(6).toString('hex');
    const startedAt = Date.now();
    this.hold(split, id, startedAt, false);
    try {
      if (!(await drained(split, DRAIN_MS))) return 'aborted';
      await this.copy(split, Infinity);
      split.readableUntil = this.until(startedAt);
      return 'ok';
    } catch (err) {
      this.log.debug({ key: displayKey(split.id), err: (err as Error).message }, 'split copies not filled');
      return 'failed';
    } finally {
      this.unhold(split, id);
    }
  }

  // ---- a fleet ----------------------------------------------------------------------------------

  private async fleetFill(split: SplitKey, { state, store }: FleetFillDeps): Promise<SplitFillOutcome | 'busy'> {
    if (!state.subscribed || !state.confirmed(Date.now())) return 'aborted';
    const id = `${state.memberId}/${nodeCrypto().randomBytes(6).toString('hex')}`;
    const lock = nodeCrypto().createHash('sha1').update(split.key).digest('hex');
    if (!(await store.tryLock(lock, id, LOCK_MS).catch(() => false))) return 'busy';
    const key = split.key.toString('base64');
    let announced = false;
    const release = () => (announced ? state.publish({ t: 'release', id, k: key }).catch(() => undefined) : undefined);
    try {
      const expected = new Set(state.liveMembers());
      const answered = new Set<string>();
      const allHeld = new Promise<boolean>((resolve) => {
        const timer = setTimeout(() => resolve(false), HOLD_ACK_MS);
        this.heldWaiters.set(id, (member) => {
          answered.add(member);
          if ([...expected].every((m) => answered.has(m))) {
            clearTimeout(timer);
            resolve(true);
          }
        });
      });
      const sentAt = Date.now();
      announced = true;
      await state.publish({ t: 'hold', id, k: key, h: namesHash(split), from: state.memberId });
      if (!(await allHeld)) {
        const missing = [...expected].filter((m) => !answered.has(m));
        this.log.debug({ key: displayKey(split.id), missing }, 'fleet fill aborted: not every member held');
        await release();
        return 'aborted';
      }
      await this.copy(split, sentAt + RESTORE_DEADLINE_MS);
      // A member that registered meanwhile did not hold: its writes may have raced the fill.
      await state.beatNow();
      const joined = state.liveMembers().filter((m) => !expected.has(m));
      if (joined.length > 0) {
        await release();
        return 'aborted';
      }
      await state.publish({ t: 'filled', id, k: key });
      return 'ok';
    } catch (err) {
      this.log.debug({ key: displayKey(split.id), err: (err as Error).message }, 'fleet fill failed');
      await release();
      return 'failed';
    } finally {
      this.heldWaiters.delete(id);
      await store.unlock(lock, id).catch(() => undefined);
    }
  }

  /** `hold`: hold the key's writes, then answer `held` (or stay silent: the filler gives up). */
  private async onHold(m: Record<string, unknown>): Promise<void> {
    const fleet = this.fleet!;
    const id = String(m['id']);
    const receivedAt = Date.now();
    if (!fleet.state.confirmed(receivedAt)) return;
    const split = this.host.splitFor(Buffer.from(String(m['k']), 'base64').toString('latin1'));
    if (split === null || namesHash(split) !== m['h']) return;
    this.hold(split, id, receivedAt, true);
    if (!(await drained(split, DRAIN_MS))) return;
    await this.host.barrier(split).catch(() => undefined);
    if (!split.holds.has(id) || Date.now() - receivedAt > RESTORE_DEADLINE_MS) return;
    await fleet.state.publish({ t: 'held', id, m: fleet.state.memberId }).catch(() => undefined);
  }

  /** `filled` (copies readable for maxCopyAge from the hold) or `release` (they stay unread). */
  private onEnd(m: Record<string, unknown>, filled: boolean): void {
    const id = String(m['id']);
    const split = this.host.splitFor(Buffer.from(String(m['k']), 'base64').toString('latin1'));
    if (split === null) return;
    const since = split.holds.get(id);
    if (since === undefined) return;
    if (filled) split.readableUntil = this.until(since);
    this.unhold(split, id);
  }

  // ---- shared -----------------------------------------------------------------------------------

  private hold(split: SplitKey, id: string, since: number, unread: boolean): void {
    split.holds.set(id, since);
    if (unread) split.readableUntil = 0;
    const timer = setTimeout(() => this.unhold(split, id), HOLD_MAX_MS);
    timer.unref();
    this.holdTimers.set(id, timer);
  }

  private unhold(split: SplitKey, id: string): void {
    const timer = this.holdTimers.get(id);
    if (timer !== undefined) clearTimeout(timer);
    this.holdTimers.delete(id);
    if (!split.holds.delete(id) || split.holds.size > 0) return;
    this.host.releaseParked(split);
  }

  /** DUMP + PTTL of the original, RESTORE … REPLACE (or DEL) on every other copy; none sent past `deadline`. */
  private async copy(split: SplitKey, deadline: number): Promise<void> {
    const [dump, pttl] = await Promise.all([
      this.host.call(split.original.slot, ['DUMP', split.key]),
      this.host.call(split.original.slot, ['PTTL', split.key]),
    ]);
    if (Date.now() > deadline) throw new Error('the fill ran out of time before writing the copies');
    const ttl = typeof pttl === 'number' && pttl > 0 ? pttl : 0;
    await Promise.all(split.active.filter((c) => c !== split.original).map((c) =>
      dump === null || pttl === -2
        ? this.host.call(c.slot, ['DEL', c.name])
        : this.host.call(c.slot, ['RESTORE', c.name, ttl, dump as Buffer, 'REPLACE'])));
  }

  private until(since: number): number {
    const age = this.host.maxCopyAge();
    return age > 0 ? since + age : Infinity;
  }
}

/** The copy names of a split key, hashed: members hold only for a fill of the names they write. */
export function namesHash(split: SplitKey): string {
  const h = nodeCrypto().createHash('sha1');
  for (const c of split.active) h.update(c.name).update('\u0000');
  return h.digest('hex').slice(0, 16);
}

/** True once `split` has no write in flight (checked every 2 ms, at most `ms`). */
async function drained(split: SplitKey, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (split.inflightWrites > 0) {
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 2));
  }
  return true;
}
