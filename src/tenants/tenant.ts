import type { TenantConfig } from '../config/types.js';
import { clockNow } from '../util/read-clock.js';
import { TokenBucket } from './token-bucket.js';

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
  limits: TenantConfig['limits'];
  clients: number;
  inflight: number;
  heldClients: number;
  requests: number;
  bytesIn: number;
  bytesOut: number;
  held: Record<TenantHold, number>;
  heldMs: number;
  refusedClients: number;
}

/** Why a tenant refused or held back its clients: the label of respool_tenant_*_total (share: fair share with other tenants). */
export type TenantHold = 'ops' | 'bytes' | 'inflight' | 'share';

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
  private readonly limits: TenantConfig['limits'];
  private readonly ops: TokenBucket | null;
  private readonly bytes: TokenBucket | null;
  /** Connections of its users now. */
  clients = 0;
  /** Replies its clients are owed now (ReplyQueue keeps it: push +1, written −1). */
  readonly inflight = { count: 0 };
  /** Requests handed on, request and reply bytes, and what held or refused its clients: RESPOOL TENANTS and metrics. */
  readonly counts = { requests: 0, bytesIn: 0, bytesOut: 0, heldMs: 0, held: { ops: 0, bytes: 0, inflight: 0, share: 0 }, refusedClients: 0 };
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
    this.limits = config.limits;
    const now = clockNow();
    const { opsPerSecond, bytesPerSecond } = config.limits;
    this.ops = opsPerSecond === null ? null : new TokenBucket(opsPerSecond, Math.max(1, opsPerSecond * BURST_SECONDS), now);
    this.bytes = bytesPerSecond === null ? null : new TokenBucket(bytesPerSecond, Math.max(1, bytesPerSecond * BURST_SECONDS), now);
  }

  get maxClients(): number | null {
    return this.limits.maxClients;
  }

  /** Whether one more client may join (maxClients). */
  hasRoom(): boolean {
    return this.limits.maxClients === null || this.clients < this.limits.maxClients;
  }

  /** A connection refused for maxClients. */
  refused(): void {
    this.counts.refusedClients++;
  }

  /**
   * Whether `client` may hand on a request now; when not, it is held and woken (tenantReady) once
   * the limit that held it allows again.
   */
  mayAdmit(client: TenantClient): boolean {
    const now = clockNow();
    let hold: TenantHold | null = null;
    if (this.ops !== null && !this.ops.available(now)) hold = 'ops';
    else if (this.bytes !== null && !this.bytes.available(now)) hold = 'bytes';
    else if (this.limits.maxInflight !== null && this.inflight.count >= this.limits.maxInflight) hold = 'inflight';
    else if ((this.turnUsed >= TURN_SHARE || this.inflight.count >= INFLIGHT_SHARE) && this.peers?.othersBusy(this) === true) hold = 'share';
    if (hold === null) return true;
    // Held until replies are written: woken by replyWritten once fewer than `repliesBelow` are owed.
    if (hold === 'inflight') this.repliesBelow = this.limits.maxInflight!;
    else if (hold === 'share' && this.inflight.count >= INFLIGHT_SHARE) this.repliesBelow = INFLIGHT_SHARE;
    if (!this.held.has(client)) {
      this.held.add(client);
      this.counts.held[hold]++;
      if (this.held.size === 1) this.heldSince = now;
    }
    // The rates tell when they allow again; replies owed wake it as they are written (replyWritten);
    // its share of a turn starts again on the next turn (startTurn: its admissions in this turn scheduled it).
    if (hold === 'share' && this.inflight.count < INFLIGHT_SHARE) this.heldForTurn = true;
    else if (hold === 'ops' || hold === 'bytes') this.scheduleWake(Math.max(this.ops?.msUntilAvailable(now) ?? 0, this.bytes?.msUntilAvailable(now) ?? 0));
    return false;
  }

  /** A request of `bytes` was handed on. */
  admitted(bytes: number): void {
    const now = clockNow();
    this.counts.requests++;
    this.counts.bytesIn += bytes;
    this.turnUsed++;
    this.lastAdmittedAt = now;
    this.peers?.admittedInTurn();
    this.ops?.take(1, now);
    this.bytes?.take(bytes, now);
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
    this.wakeTimer = null;
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
      clients: this.clients,
      inflight: this.inflight.count,
      heldClients: this.held.size,
      requests: c.requests,
      bytesIn: c.bytesIn,
      bytesOut: c.bytesOut,
      held: { ...c.held },
      heldMs: c.heldMs,
      refusedClients: c.refusedClients,
    };
  }
}
