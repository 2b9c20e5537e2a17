import type { Logger } from 'pino';
import type { HostPort, PeersFrom } from '../config/types.js';
import { nodeId, addressOf } from './cluster-emulation.js';
import type { RateLimitedLog } from '../util/rate-limited-log.js';
import { PeerCheck, type CheckOutcome } from './peer-check.js';
import { resolvePeersFrom, type PeerResolver } from './peer-sources.js';

/**
 *   alive    answers its checks; has slots
 *   suspect  its last check failed, but it answered within peerDownAfterMs; keeps its slots
 *            (CLUSTER NODES says fail?)
 *   fail     silent for peerDownAfterMs, refusing connections, or answering as someone else;
 *            no slots (its slots go to the live members)
 *   joining  answering again after a fail; gets its slots back once it has answered without a
 *            miss for peerRejoinAfterMs, doubled for each fail in the last 10 minutes (at most 8×)
 */
export type MemberState = 'alive' | 'suspect' | 'joining' | 'fail';

export interface Member {
  readonly id: string;
  readonly host: string;
  readonly port: number;
  readonly address: string;
  readonly self: boolean;
  /** Where it came from: the static list, DNS, or this instance itself. */
  readonly sources: Set<'static' | 'dns' | 'self'>;
  state: MemberState;
  /** When it last answered a check (this instance: always now); null before its first answer. */
  lastSeenAt: number | null;
  stateSince: number;
  lastError: string;
  /** Has it been alive since this instance started? A member never seen alive joins at its first answer. */
  everAlive: boolean;
  /** Times it went from having slots to fail, within the last FLAP_WINDOW_MS. */
  fails: number[];
}

export interface MembershipTimings {
  checkMs: number;
  checkTimeoutMs: number;
  downAfterMs: number;
  rejoinAfterMs: number;
  resolveMs: number;
}

export interface MembershipOptions {
  self: HostPort;
  peers: readonly HostPort[];
  peersFrom: PeersFrom | null;
  resolver: PeerResolver;
  timings: MembershipTimings;
  log: Logger;
  events: RateLimitedLog;
}

const FLAP_WINDOW_MS = 10 * 60_000;
const MAX_REJOIN_FACTOR = 8;
/** How often suspect → fail and joining → alive are looked at between checks. */
const EVALUATE_MS = 100;
/** A dropped check connection is dialed again this soon (a refused dial means the member is gone). */
const REDIAL_MS = 20;

interface Checker {
  check: PeerCheck;
  timer: NodeJS.Timeout | null;
  running: boolean;
}

/**
 * Who is in the fleet, and who is up. Members are this instance, cluster.peers, and the
 * addresses cluster.peersFrom resolves to (again every peersResolveMs; a member DNS stops naming
 * leaves, unless it is also a static peer). Each other member's announce address is checked
 * (peer-check.ts) every peerCheckMs ±50% — the jitter keeps a fleet from checking in step —
 * and its state follows the answers (MemberState). Every change of state or of the member list
 * is told to onChange listeners (the slot division, metrics) and logged as an event line.
 */
export class Membership {
  private readonly byAddress = new Map<string, Member>();
  private readonly checkers = new Map<string, Checker>();
  private readonly listeners: Array<() => void> = [];
  private evaluateTimer: NodeJS.Timeout | null = null;
  private resolveTimer: NodeJS.Timeout | null = null;
  private stopped = false;
  readonly self: Member;

  constructor(private readonly options: MembershipOptions) {
    this.self = this.makeMember(options.self, 'self');
    this.self.state = 'alive';
    this.self.everAlive = true;
    this.byAddress.set(this.self.address, this.self);
    for (const p of options.peers) this.add(p, 'static');
  }

  /** Resolves peersFrom once and runs one round of checks (at most peerCheckTimeoutMs), then keeps checking. */
  async start(): Promise<void> {
    if (this.options.peersFrom !== null) await this.resolveOnce();
    await Promise.all([...this.byAddress.values()].filter((m) => !m.self).map((m) => this.runCheck(m)));
    this.evaluateTimer = setInterval(() => this.evaluate(), EVALUATE_MS);
    this.evaluateTimer.unref();
    if (this.options.peersFrom !== null) {
      this.resolveTimer = setInterval(() => void this.resolveOnce(), this.options.timings.resolveMs);
      this.resolveTimer.unref();
    }
    this.notify();
  }

  stop(): void {
    this.stopped = true;
    if (this.evaluateTimer) clearInterval(this.evaluateTimer);
    if (this.resolveTimer) clearInterval(this.resolveTimer);
    for (const c of this.checkers.values()) {
      if (c.timer) clearTimeout(c.timer);
      c.check.close();
    }
    this.checkers.clear();
  }

  onChange(fn: () => void): void {
    this.listeners.push(fn);
  }

  /** Every member, this one included, by address. */
  members(): Member[] {
    return [...this.byAddress.values()].sort((a, b) => (a.address < b.address ? -1 : a.address > b.address ? 1 : 0));
  }

  /** The ids of the members that get slots: this one, and the alive and suspect others. */
  liveIds(): string[] {
    return this.members().filter(hasSlots).map((m) => m.id);
  }

  /** Members per state (for respool_fleet_members{state}). */
  counts(): Record<MemberState, number> {
    const out: Record<MemberState, number> = { alive: 0, suspect: 0, joining: 0, fail: 0 };
    for (const m of this.byAddress.values()) out[m.state]++;
    return out;
  }

  // ---- members ----------------------------------------------------------------------------------

  private makeMember(hp: HostPort, source: 'static' | 'dns' | 'self'): Member {
    return {
      id: nodeId(hp), host: hp.host, port: hp.port, address: addressOf(hp), self: source === 'self',
      sources: new Set([source]), state: 'fail', lastSeenAt: null, stateSince: Date.now(), lastError: 'not checked yet',
      everAlive: false, fails: [],
    };
  }

  private add(hp: HostPort, source: 'static' | 'dns'): boolean {
    const address = addressOf(hp);
    const known = this.byAddress.get(address);
    if (known !== undefined) {
      known.sources.add(source);
      return false;
    }
    const member = this.makeMember(hp, source);
    this.byAddress.set(address, member);
    this.checkers.set(address, { check: new PeerCheck(hp, member.id, () => this.checkSoon(member)), timer: null, running: false });
    return true;
  }

  private remove(member: Member): void {
    this.byAddress.delete(member.address);
    const c = this.checkers.get(member.address);
    if (c) {
      if (c.timer) clearTimeout(c.timer);
      c.check.close();
      this.checkers.delete(member.address);
    }
  }

  private async resolveOnce(): Promise<void> {
    const from = this.options.peersFrom!;
    let found: HostPort[];
    try {
      found = await resolvePeersFrom(from, this.options.resolver);
    } catch (err) {
      this.options.events.emit('warn', 'peers_resolve_failed', from.name, { name: from.name, err: (err as Error).message },
        `could not resolve cluster.peersFrom ${from.name}; keeping the members known so far`);
      return;
    }
    if (this.stopped) return;
    const named = new Set(found.map(addressOf));
    let changed = false;
    for (const hp of found) {
      if (this.add(hp, 'dns')) {
        changed = true;
        const m = this.byAddress.get(addressOf(hp))!;
        this.options.events.emit('info', 'member_added', m.address, { member: m.address, source: 'dns' }, `fleet member ${m.address} added (${from.name} names it)`);
        if (this.evaluateTimer !== null) this.checkSoon(m);
      }
    }
    for (const m of [...this.byAddress.values()]) {
      if (m.self || !m.sources.has('dns') || named.has(m.address)) continue;
      m.sources.delete('dns');
      if (m.sources.size > 0) continue; // also a static peer
      this.remove(m);
      changed = true;
      this.options.events.emit('info', 'member_removed', m.address, { member: m.address, source: 'dns' },
        `fleet member ${m.address} removed (${from.name} no longer names it)${hasSlots(m) ? '; its slots move to the others' : ''}`);
    }
    if (changed) this.notify();
  }

  // ---- checks -----------------------------------------------------------------------------------

  private checkSoon(member: Member): void {
    const c = this.checkers.get(member.address);
    if (c === undefined || c.running || this.stopped) return;
    if (c.timer) clearTimeout(c.timer);
    c.timer = setTimeout(() => void this.runCheck(member), REDIAL_MS);
    c.timer.unref();
  }

  /** One check, then the next one scheduled (a dropped connection is dialed again at once). */
  private async runCheck(member: Member): Promise<void> {
    const c = this.checkers.get(member.address);
    if (c === undefined || c.running || this.stopped) return;
    c.running = true;
    c.timer = null;
    let outcome: CheckOutcome;
    try {
      outcome = await c.check.check(this.options.timings.checkTimeoutMs);
    } finally {
      c.running = false;
    }
    if (this.stopped || this.checkers.get(member.address) !== c) return;
    this.record(member, outcome);
    const closedMidCheck = !outcome.ok && outcome.error === 'connection closed';
    const delay = closedMidCheck ? REDIAL_MS : jittered(this.options.timings.checkMs);
    c.timer = setTimeout(() => void this.runCheck(member), delay);
    c.timer.unref();
  }

  private record(m: Member, outcome: CheckOutcome): void {
    const now = Date.now();
    if (outcome.ok) {
      m.lastSeenAt = now;
      m.lastError = '';
      if (m.state === 'suspect') this.become(m, 'alive', 'answered again');
      else if (m.state === 'fail') {
        if (!m.everAlive) this.become(m, 'alive', 'first answer');
        else this.become(m, 'joining', `answering again; slots back after ${this.rejoinHold(m)} ms without a miss`);
      } else if (m.state === 'joining' && now - m.stateSince >= this.rejoinHold(m)) this.become(m, 'alive', 'answered throughout its hold');
      return;
    }
    m.lastError = outcome.error;
    if (m.state === 'fail') return;
    if (outcome.refused || m.state === 'joining') this.become(m, 'fail', outcome.error);
    else if (m.lastSeenAt === null || now - m.lastSeenAt >= this.options.timings.downAfterMs) this.become(m, 'fail', outcome.error);
    else if (m.state === 'alive') this.become(m, 'suspect', outcome.error);
  }

  /** Between checks: a suspect silent for peerDownAfterMs fails; a joining member that held long enough is alive. */
  private evaluate(): void {
    const now = Date.now();
    for (const m of this.byAddress.values()) {
      if (m.self) {
        m.lastSeenAt = now;
        continue;
      }
      if (m.state === 'suspect' && (m.lastSeenAt === null || now - m.lastSeenAt >= this.options.timings.downAfterMs)) {
        this.become(m, 'fail', m.lastError || `no answer for ${this.options.timings.downAfterMs} ms`);
      } else if (m.state === 'joining' && now - m.stateSince >= this.rejoinHold(m) && m.lastSeenAt !== null && now - m.lastSeenAt < this.options.timings.downAfterMs) {
        this.become(m, 'alive', 'answered throughout its hold');
      }
    }
  }

  private rejoinHold(m: Member): number {
    const now = Date.now();
    m.fails = m.fails.filter((t) => now - t < FLAP_WINDOW_MS);
    const factor = Math.min(MAX_REJOIN_FACTOR, 2 ** Math.max(0, m.fails.length - 1));
    return this.options.timings.rejoinAfterMs * factor;
  }

  private become(m: Member, state: MemberState, why: string): void {
    const from = m.state;
    if (from === state) return;
    const now = Date.now();
    const wasLive = hasSlots(m);
    const heldFor = now - m.stateSince;
    m.state = state;
    m.stateSince = now;
    const { events } = this.options;
    if (state === 'alive') m.everAlive = true;
    if (state === 'fail' && wasLive) {
      m.fails.push(now);
      events.emit('warn', 'member_down', m.address, { member: m.address, from, reason: why, lastSeenMsAgo: m.lastSeenAt === null ? null : now - m.lastSeenAt },
        `fleet member ${m.address} is down (${why}); its slots move to the live members`);
    } else if (state === 'joining') {
      events.emit('info', 'member_back', m.address, { member: m.address, downForMs: heldFor, holdMs: this.rejoinHold(m) }, `fleet member ${m.address} answers again (${why})`);
    } else if (state === 'alive' && !wasLive) {
      events.emit('info', 'member_up', m.address, { member: m.address, from, reason: why }, `fleet member ${m.address} is up (${why}); it gets its slots`);
    } else {
      this.options.log.debug({ member: m.address, from, to: state, reason: why }, 'fleet member state');
    }
    this.notify();
  }

  private notify(): void {
    for (const fn of this.listeners) fn();
  }
}

export function hasSlots(m: Member): boolean {
  return m.state === 'alive' || m.state === 'suspect';
}

/** Uniform in [0.5, 1.5) × ms. */
function jittered(ms: number): number {
  return Math.max(1, Math.round(ms * (0.5 + Math.random())));
}
