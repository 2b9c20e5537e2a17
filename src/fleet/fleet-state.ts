import { nodeCrypto } from '../util/lazy-builtins.js';
import type { Logger } from 'pino';
import type { Metrics } from '../metrics/metrics.js';
import type { RespoolConfig, TenantLimits } from '../config/types.js';
import type { FleetStore } from './fleet-store.js';

/** cluster.fleetState: upstream, or auto in a fleet (peers or peersFrom). */
export function usesFleetState(config: Pick<RespoolConfig, 'cluster'>): boolean {
  const { fleetState, peers, peersFrom } = config.cluster;
  return fleetState === 'upstream' || (fleetState === 'auto' && (peers.length > 0 || peersFrom !== null));
}

/**
 * This member's copy of the fleet-wide runtime state (fleet-store.ts holds the original), the
 * registrations of every member, and this member's lease on what it knows.
 *
 *   beat     every POLL_MS (and at once on a change notice) one script registers this member —
 *            its applied version and a beat counter — and reads the state if its version moved.
 *   lease    the state this member applied is known to be current for cluster.fleetLeaseMs after
 *            a beat that succeeded (from when it was sent). A member past its lease whose last
 *            beat attempt did not fail (nor go unanswered for BEAT_DEADLINE_MS) — it was paused,
 *            or its event loop stalled — has its writes refused (TRYAGAIN) until a beat
 *            succeeds, because the fleet may have split a key meanwhile without it (see `stale`
 *            below). When beats do fail (the state's shard is unreachable) writes go on: then
 *            nobody can change the state either, unless this member alone is cut off from that
 *            shard — copies it leaves stale then are bounded by hotKeys.maxCopyAge, like a write
 *            made directly on a node.
 *   members  every member's registration, with the time (this member's clock) its beat counter
 *            last changed. A member whose beat has not changed for fleetLeaseMs + margin is past
 *            its own lease: it cannot write with an old state, so a change need not wait for it
 *            (`stale`). Registrations silent for a minute are removed.
 *   changes  compare-and-set on the version (update); then every member that is not stale must
 *            report the new version as applied (awaitApplied) before the change takes effect
 *            for reads.
 */
export type SplitPhase = 'active' | 'removing';

export interface FleetRule {
  kind: 'key' | 'prefix' | 'pattern';
  text: string;
  /** Copies, the original included (resolved when added: the fleet must agree on the names). */
  copies: number;
  auto: boolean;
  /** removing: no member reads the copies any more, but every member still writes them. */
  phase: SplitPhase;
  /** The member that added it, and when (ms since the epoch). */
  by: string;
  at: number;
}

export interface FleetDoc {
  rules: FleetRule[];
  /** Users changed at run time through any member (fleet-acl.ts); absent until the first change. */
  acl?: { epoch: number; users: Record<string, string | null> };
  /** Tenants' limits changed at run time through any member (fleet-tenants.ts); absent until the first change. */
  tenants?: Record<string, TenantLimits>;
  /** A live migration: what every member must be doing (src/migration/fleet-migration.ts reads it). */
  migration?: unknown;
}

export interface Registration {
  id: string;
  address: string;
  applied: number;
  /** When its beat last changed, by this member's clock. */
  changedAt: number;
  stale: boolean;
}

export interface FleetStateOptions {
  store: FleetStore;
  leaseMs: number;
  log: Logger;
  metrics?: Metrics;
}

const POLL_MS = 250;
/** A beat unanswered this long counts as failed (the state's shard is unreachable). */
const BEAT_DEADLINE_MS = 1000;
/** Beyond the lease, before another member's silence makes it stale (clock rates, one poll). */
const STALE_MARGIN_MS = 2 * POLL_MS + 250;
const FORGET_AFTER_MS = 60_000;
const UPDATE_ATTEMPTS = 8;

type BusHandler = (message: Record<string, unknown>) => void;

export class FleetState {
  version = 0;
  doc: FleetDoc = { rules: [] };
  readonly incarnation = nodeCrypto().randomBytes(4).toString('hex');
  private beats = 0;
  /** When the last beat that succeeded was sent. */
  private confirmedAt = -Infinity;
  /** When the last beat that failed was answered (or gave up). */
  private failedAt = -Infinity;
  private readonly registrations = new Map<string, { beat: string; entry: { a: string; v: number }; changedAt: number }>();
  private timer: NodeJS.Timeout | null = null;
  private inFlight: Promise<void> | null = null;
  private again = false;
  private stopped = false;
  private readonly docListeners: Array<(doc: FleetDoc, version: number) => void> = [];
  private readonly bus = new Map<string, BusHandler[]>();
  private readonly appliedWaiters = new Set<() => void>();

  /** This member's registration id (its announce address; with workers, the worker's index too) and address. */
  private identity = { memberId: '', address: '' };

  constructor(private readonly options: FleetStateOptions) {
    this.on('state', () => this.beatNow());
    this.on('applied', () => {
      for (const w of this.appliedWaiters) w();
    });
  }

  get memberId(): string {
    return this.identity.memberId;
  }

  /** Set once the announce address is known (after listening), before start. */
  identify(memberId: string, address: string): void {
    this.identity = { memberId, address };
  }

  get leaseMs(): number {
    return this.options.leaseMs;
  }

  /** The first beat (bounded), the bus subscription, then beats every POLL_MS. */
  async start(timeoutMs: number): Promise<void> {
    this.options.store.listen((payload) => this.dispatch(payload));
    await Promise.race([this.beatNow(), new Promise((r) => setTimeout(r, timeoutMs).unref())]);
    this.timer = setInterval(() => void this.beatNow(), POLL_MS);
    this.timer.unref();
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    this.options.store.stop();
  }

  onDoc(fn: (doc: FleetDoc, version: number) => void): void {
    this.docListeners.push(fn);
  }

  /** Handles bus messages of one type ({ t: type, … }). */
  on(type: string, fn: BusHandler): void {
    const list = this.bus.get(type) ?? [];
    list.push(fn);
    this.bus.set(type, list);
  }

  publish(message: { t: string; [k: string]: unknown }): Promise<void> {
    return this.options.store.publish(message);
  }

  get subscribed(): boolean {
    return this.options.store.subscribed;
  }

  /** May this member write now (its lease holds, or the state cannot be reached by it anyway)? */
  writable(now: number): boolean {
    return now - this.confirmedAt <= this.options.leaseMs || now - this.failedAt <= this.options.leaseMs;
  }

  /** Is what it knows confirmed within the lease (reads of copies need that)? */
  confirmed(now: number): boolean {
    return now - this.confirmedAt <= this.options.leaseMs;
  }

  confirmedAgeMs(now = Date.now()): number {
    return this.confirmedAt === -Infinity ? Infinity : now - this.confirmedAt;
  }

  /** Every member's registration as this member last read it. */
  members(now = Date.now()): Registration[] {
    return [...this.registrations].map(([id, r]) => ({
      id, address: r.entry.a, applied: r.entry.v, changedAt: r.changedAt,
      stale: id !== this.memberId && now - r.changedAt > this.options.leaseMs + STALE_MARGIN_MS,
    }));
  }

  /** The members a change or a fill must hear from: every registration that is not stale. */
  liveMembers(now = Date.now()): string[] {
    return this.members(now).filter((m) => !m.stale).map((m) => m.id);
  }

  /** One beat now (joins one in flight, then runs once more so the result is fresh). */
  beatNow(): Promise<void> {
    if (this.stopped) return Promise.resolve();
    if (this.inFlight !== null) {
      this.again = true;
      return this.inFlight;
    }
    this.inFlight = this.beatOnce().finally(() => {
      this.inFlight = null;
      if (this.again) {
        this.again = false;
        void this.beatNow();
      }
    });
    return this.inFlight;
  }

  /**
   * Changes the state: `mutate` gets a copy of the current doc and returns the new one (null: no
   * change). Compare-and-set, retried on a newer state. Resolves with the version in force.
   */
  async update(mutate: (doc: FleetDoc) => FleetDoc | null): Promise<number> {
    for (let attempt = 0; attempt < UPDATE_ATTEMPTS; attempt++) {
      await this.beatNow();
      const next = mutate(structuredClone(this.doc));
      if (next === null) return this.version;
      const committed = await this.options.store.commit(this.version, JSON.stringify(next));
      if (committed !== null) {
        this.apply(committed, next);
        void this.publish({ t: 'state', v: committed }).catch(() => {});
        return committed;
      }
    }
    throw new Error('the fleet state kept changing under this change; try again');
  }

  /**
   * Resolves once every member that is not stale reports `version` applied; after timeoutMs,
   * with the addresses of those that did not.
   */
  async awaitApplied(version: number, timeoutMs: number): Promise<string[]> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      await this.beatNow();
      const behind = this.members().filter((m) => !m.stale && m.applied < version && m.id !== this.memberId);
      if (behind.length === 0) return [];
      const left = deadline - Date.now();
      if (left <= 0) return behind.map((m) => m.address);
      await new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(t);
          this.appliedWaiters.delete(done);
          resolve();
        };
        const t = setTimeout(done, Math.min(left, 50));
        this.appliedWaiters.add(done);
      });
    }
  }

  private async beatOnce(): Promise<void> {
    const sentAt = Date.now();
    const entry = JSON.stringify({ a: this.identity.address, v: this.version, b: ++this.beats, i: this.incarnation });
    let result;
    try {
      // A beat not answered within BEAT_DEADLINE_MS counts as failed now (a black-holed shard
      // would otherwise hold it for timeouts.commandMs); a late answer is dropped.
      const beat = this.options.store.beat(this.identity.memberId, entry, this.version);
      beat.catch(() => undefined);
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer within ${BEAT_DEADLINE_MS} ms`)), BEAT_DEADLINE_MS);
      });
      result = await Promise.race([beat, late]).finally(() => clearTimeout(timer));
    } catch (err) {
      this.failedAt = Date.now();
      this.options.log.debug({ err: (err as Error).message }, 'fleet: beat failed');
      return;
    }
    this.confirmedAt = sentAt;
    const now = Date.now();
    for (const [id, text] of result.members) {
      let parsed: { a: string; v: number; b: number; i: string };
      try {
        parsed = JSON.parse(text) as typeof parsed;
      } catch {
        continue;
      }
      const beat = `${parsed.i}:${parsed.b}`;
      const known = this.registrations.get(id);
      if (known === undefined || known.beat !== beat) this.registrations.set(id, { beat, entry: { a: parsed.a, v: parsed.v }, changedAt: now });
    }
    for (const [id, r] of this.registrations) {
      if (!result.members.has(id)) this.registrations.delete(id);
      else if (id !== this.identity.memberId && now - r.changedAt > FORGET_AFTER_MS) {
        this.registrations.delete(id);
        void this.options.store.forget(id).catch(() => {});
      }
    }
    if (result.version < this.version) {
      // The state was deleted or flushed in the upstream (FLUSHALL, DEL): it is the source of
      // truth, so this member follows it from that version on.
      this.options.log.warn({ event: 'fleet_state_reset', version: result.version, applied: this.version }, 'fleet: the shared state in the upstream is older than the one applied here (deleted or flushed); following it');
      this.version = -1;
    }
    if (result.version !== this.version && (result.doc !== null || result.version === 0)) {
      let doc: FleetDoc;
      try {
        doc = result.doc === null ? { rules: [] } : parseDoc(result.doc);
      } catch (err) {
        this.options.log.error({ err: (err as Error).message, version: result.version }, 'fleet: the shared state does not parse; keeping the one applied');
        return;
      }
      this.apply(result.version, doc);
      // Report it at once, so a change waiting for this member goes on.
      void this.beatNow().then(() => this.publish({ t: 'applied', m: this.identity.memberId, v: this.version })).catch(() => {});
    }
  }

  private apply(version: number, doc: FleetDoc): void {
    if (version < this.version) return;
    this.version = version;
    this.doc = doc;
    this.options.metrics?.raw.fleet_state_version.set(version);
    for (const fn of this.docListeners) fn(doc, version);
  }

  private dispatch(payload: Buffer): void {
    let message: Record<string, unknown>;
    try {
      message = JSON.parse(payload.toString('utf8')) as Record<string, unknown>;
    } catch {
      return;
    }
    const handlers = typeof message['t'] === 'string' ? this.bus.get(message['t']) : undefined;
    if (handlers !== undefined) for (const fn of handlers) fn(message);
  }
}

function parseDoc(text: string): FleetDoc {
  const raw = JSON.parse(text) as Partial<FleetDoc>;
  if (!Array.isArray(raw.rules)) throw new Error('no rules list');
  const acl = raw.acl;
  if (acl !== undefined && (typeof acl !== 'object' || acl === null || typeof acl.epoch !== 'number' || typeof acl.users !== 'object')) throw new Error('acl is not { epoch, users }');
  const tenants = raw.tenants;
  if (tenants !== undefined && (typeof tenants !== 'object' || tenants === null || Array.isArray(tenants))) throw new Error('tenants is not { name: limits }');
  return { rules: raw.rules, ...(acl === undefined ? {} : { acl }), ...(tenants === undefined ? {} : { tenants }), ...(raw.migration === undefined ? {} : { migration: raw.migration }) };
}
