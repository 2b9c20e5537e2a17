import type { TenantConfig, TenantLimits } from '../config/types.js';
import { clockNow } from '../util/read-clock.js';
import { TokenBucket } from './token-bucket.js';
import type { WindowedHistogram } from '../metrics/latency-windows.js';

/** The share of a second a rate limit lets through at once (its bucket's depth): small, so a run stays within a few % of the rate. */
const BURST_SECONDS = 0.05;
/**
 * Fair share while several tenants have requests under way: each hands on at most TURN_SHARE
 * requests between two turns of the event loop, and is owed at most INFLIGHT_SHARE replies, so
 * one tenant's deep pipelines fill neither a turn's link batches nor the links' queues ahead of
 * another's requests. Alone, a tenant is not held by them.
 */
export const TURN_SHARE = 64;
export const INFLIGHT_SHARE = 64;
/**
 * A tenant counts as busy for this long after it last handed a request on: a client at pipeline
 * 1 has nothing under way between a reply and its next request, and another tenant's pipelines
 * must not fill the links in that gap.
 */
export const BUSY_MS = 100;

/** The limits a tenant's budget divides among workers and fleet members (tenant-budgets.ts). */
export type BudgetKind = 'ops' | 'bytes' | 'clients' | 'inflight';

/** What a tenant's clients did on this member over a while: tenant-budgets.ts shares it with the other members. */
export interface TenantUsage {
  /** Requests handed on. */
  ops: number;
  /** Request and reply bytes. */
  bytes: number;
  /** Clients now. */
  clients: number;
  /** The most replies owed at once. */
  inflight: number;
  /** Which limits held a client back or refused one (HELD_OPS | HELD_BYTES | HELD_CLIENTS | HELD_INFLIGHT). */
  held: number;
}
export const HELD_OPS = 1;
export const HELD_BYTES = 2;
export const HELD_CLIENTS = 4;
export const HELD_INFLIGHT = 8;
const HELD_BY = { ops: HELD_OPS, bytes: HELD_BYTES, inflight: HELD_INFLIGHT } as const;

/** A rate's bucket after its rate changed: kept (what was taken stays taken), made, or dropped (no limit). */
function bucketFor(bucket: TokenBucket | null, rate: number | null, now: number): TokenBucket | null {
  if (rate === null) return null;
  const burst = Math.max(1, rate * BURST_SECONDS);
  if (bucket === null) return new TokenBucket(rate, burst, now);
  bucket.setRate(rate, burst, now);
  return bucket;
}

/** What a tenant needs of a client it holds back: to be handed its turn again once its limits allow. */
export interface TenantClient {
  readonly closed: boolean;
  /** The tenant's limits allow again: the client hands on what it holds (ClientSession.wake). */
  tenantReady(): void;
}

/**
 * A client moves from one tenant to another (or to none: `to` null), with the replies it is owed:
 * each tenant's counts come back to 0 with its clients.
 */
export function moveClient(from: Tenant | null, to: Tenant | null, owed: number): void {
  if (from !== null) {
    from.clients--;
    from.inflight.count -= owed;
  }
  if (to !== null) {
    to.clients++;
    to.inflight.count += owed;
  }
}

/** A tenant's limits and figures at one moment (RESPOOL TENANTS, /tenants). */
export interface TenantSnapshot {
  name: string;
  keyPrefix: string | null;
  upstreams: readonly string[] | null;
  limits: TenantLimits;
  /** This member's part of the limits (the whole of them when it is alone: tenant-budgets.ts). */
  allowed: TenantLimits;
  clients: number;
  inflight: number;
  heldClients: number;
  requests: number;
  bytesIn: number;
  bytesOut: number;
  held: Record<TenantHold, number>;
  heldMs: number;
  refusedClients: number;
  /** Last-minute p50 and p99 (µs) of its requests, receive → reply written; null before any. */
  latencyUs: { p50: number; p99: number } | null;
  priority: number;
  /** Slowed while a node is saturated (tenant-shedding.ts): to what rate and why; null: not slowed. */
  shed: { opsPerSecond: number; why: string } | null;
}

/** Why a tenant refused or held back its clients: the label of respool_tenant_*_total (share: fair share with other tenants). */
export type TenantHold = 'ops' | 'bytes' | 'inflight' | 'share' | 'shed';

/** What a tenant asks of all of them: whether another tenant has requests under way too. */
export interface TenantPeers {
  /** Another tenant than `tenant` is owed replies now, or handed a request on within BUSY_MS. */
  othersBusy(tenant: Tenant): boolean;
  /** A tenant handed a request on: every tenant's share of a turn starts again on the next turn (Tenant.startTurn). */
  admittedInTurn(): void;
}

/**
 * One tenant at run time (config tenants[]): its limits over every client of its users, and what
 * they did. A request is handed on only while the tenant's limits allow (mayAdmit); a client held
 * back stops handing on and — its requests left in its buffer — reading (ClientSession's
 * read-ahead bound): the back-pressure of a busy server, not an error.
 *
 *   ops      : a bucket of opsPerSecond; a request takes 1
 *   bytes    : a bucket of bytesPerSecond; a request takes its bytes, a reply written its bytes
 *   inflight : replies its clients are owed now (their reply queues' entries) < maxInflight
 *   clients  : connections authenticated as its users ≤ maxClients (moveClient)
 *
 *   invariants: a held client is in `held` at most once and is woken once per wake (one timer per
 *               tenant); `clients` and `inflight` come back to 0 when its clients are gone.
 */
export class Tenant {
  readonly name: string;
  readonly keyPrefix: string | null;
  /** Its own upstreams as host:port (tenants[].upstreams), or null: the main ones. */
  readonly upstreams: readonly string[] | null;
  /** The tenant's whole budget (config, or RESPOOL TENANT SET): over every worker and fleet member. */
  private limits: TenantLimits;
  /** This member's part of each limit (tenant-budgets.ts), 1 when it is alone. */
  private shares: Record<BudgetKind, number> = { ops: 1, bytes: 1, clients: 1, inflight: 1 };
  /** The limits this member holds its clients to: `limits` × `shares`. */
  private allowed: TenantLimits;
  private ops: TokenBucket | null = null;
  private bytes: TokenBucket | null = null;
  /**
   * What takeUsage cannot read off `counts` (tenant-budgets.ts reports it to the other members): the
   * most replies owed at once and which limits held its clients since the last call; and the
   * counts at that call, whose differences are its requests and bytes since.
   */
  private usage = { inflight: 0, held: 0 };
  private usageTakenAt = { requests: 0, bytes: 0 };
  /** Connections of its users now. */
  clients = 0;
  /**
   * Replies its clients are owed now (ReplyQueue keeps it: push +1, written −1), and the
   * last-minute latency of its requests as its clients see them (ReplyQueue records each timed one).
   */
  readonly inflight: { count: number; latency: WindowedHistogram | null } = { count: 0, latency: null };
  /** Requests handed on, request and reply bytes, and what held or refused its clients: RESPOOL TENANTS and metrics. */
  readonly counts = { requests: 0, bytesIn: 0, bytesOut: 0, heldMs: 0, held: { ops: 0, bytes: 0, inflight: 0, share: 0, shed: 0 }, refusedClients: 0 };
  /** Higher is served longer when a node saturates (tenants[].priority; tenant-shedding.ts). */
  readonly priority: number;
  /** While a node is saturated: the requests per second it is slowed to, and why (tenant-shedding.ts); null: not slowed. */
  private shedBucket: TokenBucket | null = null;
  private shedRate: number | null = null;
  shedWhy: string | null = null;
  /** Some client is held until fewer replies than this are owed (maxInflight, INFLIGHT_SHARE); 0: none is. */
  private repliesBelow = 0;
  /** Requests handed on since its share of a turn was last renewed (fair share). */
  private turnUsed = 0;
  /** When it last handed a request on (util/read-clock.ts), -Infinity before: busy until BUSY_MS after. */
  private lastAdmittedAt = Number.NEGATIVE_INFINITY;
  /** Some client is held until its share of a turn starts again (startTurn). */
  private heldForTurn = false;
  private readonly held = new Set<TenantClient>();
  private wakeTimer: NodeJS.Timeout | null = null;
  private heldSince = 0;

  constructor(
    config: TenantConfig,
    private readonly peers: TenantPeers | null = null,
  ) {
    this.name = config.name;
    this.keyPrefix = config.keyPrefix;
    this.upstreams = config.upstream === null ? null : config.upstream.upstreams.map((u) => `${u.host}:${u.port}`);
    this.limits = { ...config.limits };
    this.priority = config.priority ?? 0;
    this.allowed = this.limits;
    this.applyLimits();
  }

  get maxClients(): number | null {
    return this.allowed.maxClients;
  }

  /** Its requests' latency goes to `window` (metrics/latency-windows.ts: the last minute). */
  measureLatency(window: WindowedHistogram): void {
    this.inflight.latency = window;
  }

  /** p50 and p99 of the last minute, in µs, or null before any timed request. */
  latencyUs(): { p50: number; p99: number } | null {
    const h = this.inflight.latency?.merged();
    return h === undefined || h.count === 0 ? null : { p50: h.percentileUs(50), p99: h.percentileUs(99) };
  }

  /** Its whole budget now. */
  get budget(): Readonly<TenantLimits> {
    return this.limits;
  }

  /** A new budget (RESPOOL TENANT SET, a reload): this member's shares of it apply at once. */
  setLimits(limits: TenantLimits): void {
    this.limits = { ...limits };
    this.applyLimits();
    this.wake(); // a raised limit lets held clients go on now
  }

  /** This member's parts of the budget (tenant-budgets.ts), each in (0, 1]. */
  setShares(shares: Record<BudgetKind, number>): void {
    const s = this.shares;
    if (s.ops === shares.ops && s.bytes === shares.bytes && s.clients === shares.clients && s.inflight === shares.inflight) return;
    this.shares = { ...shares };
    this.applyLimits();
  }

  /** The requests per second it is slowed to while a node is saturated, or null. */
  get shedOpsPerSecond(): number | null {
    return this.shedRate;
  }

  /** Slows it to `rate` requests per second while a node is saturated (tenant-shedding.ts), or stops (null). */
  setShedRate(rate: number | null, why: string | null): void {
    this.shedRate = rate;
    this.shedWhy = why;
    this.shedBucket = bucketFor(this.shedBucket, rate, clockNow());
    if (rate === null) this.wake();
  }

  /** What its clients did since the last call (ops and bytes counted, clients now, the most replies owed at once, which limits held them). */
  takeUsage(): TenantUsage {
    const c = this.counts;
    const bytes = c.bytesIn + c.bytesOut;
    const taken = this.usageTakenAt;
    const u: TenantUsage = { ops: c.requests - taken.requests, bytes: bytes - taken.bytes, clients: this.clients, inflight: Math.max(this.usage.inflight, this.inflight.count), held: this.usage.held };
    this.usageTakenAt = { requests: c.requests, bytes };
    this.usage = { inflight: this.inflight.count, held: 0 };
    return u;
  }

  private applyLimits(): void {
    const now = clockNow();
    const l = this.limits;
    const f = this.shares;
    const part = (limit: number | null, share: number) => (limit === null ? null : limit * share);
    const count = (limit: number | null, share: number) => (limit === null ? null : Math.max(1, Math.round(limit * share)));
    this.allowed = {
      opsPerSecond: part(l.opsPerSecond, f.ops),
      bytesPerSecond: part(l.bytesPerSecond, f.bytes),
      maxClients: count(l.maxClients, f.clients),
      maxInflight: count(l.maxInflight, f.inflight),
    };
    this.ops = bucketFor(this.ops, this.allowed.opsPerSecond, now);
    this.bytes = bucketFor(this.bytes, this.allowed.bytesPerSecond, now);
  }

  /** Whether one more client may join (maxClients). */
  hasRoom(): boolean {
    return this.allowed.maxClients === null || this.clients < this.allowed.maxClients;
  }

  /** A connection refused for maxClients. */
  refused(): void {
    this.counts.refusedClients++;
    this.usage.held |= HELD_CLIENTS;
  }

  /**
   * Whether `client` may hand on a request now; when not, it is held and woken (tenantReady) once
   * the limit that held it allows again.
   */
  mayAdmit(client: TenantClient): boolean {
    const now = clockNow();
    let hold: TenantHold | null = null;
    if (this.shedBucket !== null && !this.shedBucket.available(now)) hold = 'shed';
    else if (this.ops !== null && !this.ops.available(now)) hold = 'ops';
    else if (this.bytes !== null && !this.bytes.available(now)) hold = 'bytes';
    else if (this.allowed.maxInflight !== null && this.inflight.count >= this.allowed.maxInflight) hold = 'inflight';
    else if ((this.turnUsed >= TURN_SHARE || this.inflight.count >= INFLIGHT_SHARE) && this.peers?.othersBusy(this) === true) hold = 'share';
    if (hold === null) return true;
    if (hold !== 'share' && hold !== 'shed') this.usage.held |= HELD_BY[hold];
    // Held until replies are written: woken by replyWritten once fewer than `repliesBelow` are owed.
    if (hold === 'inflight') this.repliesBelow = this.allowed.maxInflight!;
    else if (hold === 'share' && this.inflight.count >= INFLIGHT_SHARE) this.repliesBelow = INFLIGHT_SHARE;
    if (!this.held.has(client)) {
      this.held.add(client);
      this.counts.held[hold]++;
      if (this.held.size === 1) this.heldSince = now;
    }
    // The rates tell when they allow again; replies owed wake it as they are written (replyWritten);
    // its share of a turn starts again on the next turn (startTurn: its admissions in this turn scheduled it).
    if (hold === 'share' && this.inflight.count < INFLIGHT_SHARE) this.heldForTurn = true;
    else if (hold === 'ops' || hold === 'bytes' || hold === 'shed') this.scheduleWake(Math.max(this.ops?.msUntilAvailable(now) ?? 0, this.bytes?.msUntilAvailable(now) ?? 0, this.shedBucket?.msUntilAvailable(now) ?? 0));
    return false;
  }

  /** A request of `bytes` was handed on. */
  admitted(bytes: number): void {
    const now = clockNow();
    this.counts.requests++;
    this.counts.bytesIn += bytes;
    if (this.inflight.count > this.usage.inflight) this.usage.inflight = this.inflight.count;
    this.turnUsed++;
    this.lastAdmittedAt = now;
    this.peers?.admittedInTurn();
    this.ops?.take(1, now);
    this.bytes?.take(bytes, now);
    this.shedBucket?.take(1, now);
  }

  /** A reply of `bytes` was written to one of its clients. */
  replyWritten(bytes: number): void {
    this.counts.bytesOut += bytes;
    this.bytes?.take(bytes, clockNow());
    if (this.inflight.count < this.repliesBelow) {
      this.repliesBelow = 0;
      this.scheduleWake(0);
    }
  }

  /** Owed replies now, or handed a request on within BUSY_MS of `now`. */
  busy(now: number): boolean {
    return this.inflight.count > 0 || now - this.lastAdmittedAt < BUSY_MS;
  }

  /** A new turn of the event loop (TenantPeers.admittedInTurn): its share of a turn starts again, the clients it held for it go on. */
  startTurn(): void {
    this.turnUsed = 0;
    if (!this.heldForTurn) return;
    this.heldForTurn = false;
    this.wake();
  }

  private scheduleWake(ms: number): void {
    if (this.wakeTimer !== null) return;
    this.wakeTimer = setTimeout(this.wake, Math.max(1, Math.ceil(ms)));
  }

  private readonly wake = (): void => {
    if (this.wakeTimer !== null) clearTimeout(this.wakeTimer);
    this.wakeTimer = null;
    if (this.held.size === 0) return;
    const held = [...this.held];
    this.held.clear();
    this.counts.heldMs += clockNow() - this.heldSince;
    for (const client of held) if (!client.closed) client.tenantReady();
  };

  /** What RESPOOL TENANTS and /tenants show of it. */
  snapshot(): TenantSnapshot {
    const c = this.counts;
    return {
      name: this.name,
      keyPrefix: this.keyPrefix,
      upstreams: this.upstreams,
      limits: { ...this.limits },
      allowed: { ...this.allowed },
      clients: this.clients,
      inflight: this.inflight.count,
      heldClients: this.held.size,
      requests: c.requests,
      bytesIn: c.bytesIn,
      bytesOut: c.bytesOut,
      held: { ...c.held },
      heldMs: c.heldMs,
      refusedClients: c.refusedClients,
      latencyUs: this.latencyUs(),
      priority: this.priority,
      shed: this.shedRate === null ? null : { opsPerSecond: this.shedRate, why: this.shedWhy ?? '' },
    };
  }
}
