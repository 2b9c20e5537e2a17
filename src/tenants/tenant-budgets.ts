import type { BudgetKind, Tenant, TenantUsage } from './tenant.js';
import { HELD_BYTES, HELD_CLIENTS, HELD_INFLIGHT, HELD_OPS } from './tenant.js';

/** How often each member reports what its tenants' clients did and takes its shares again. */
export const BUDGET_PERIOD_MS = 250;
/** A member silent this long is gone: its part goes to the others. */
const SILENT_AFTER_MS = 4 * BUDGET_PERIOD_MS;
/** A member not held by a limit is given what it used, with this much room to grow … */
const GROWTH = 1.25;
/** … and at least this part of the budget's even share, so that traffic moving to it starts at once. */
const FLOOR_OF_EVEN = 0.05;

/** One member's report: per tenant, what its clients did over the last period (rates per second). */
export interface UsageReport {
  member: string;
  tenants: Record<string, { ops: number; bytes: number; clients: number; inflight: number; held: number }>;
}

/** How a member's reports reach the others (worker IPC or the fleet's bus) and theirs reach it. */
export interface BudgetTransport {
  send(report: UsageReport): void;
  /** Members expected now (workers × live fleet members), those that have not reported yet included. */
  expectedMembers(): number;
}

const KINDS: ReadonlyArray<{ kind: BudgetKind; limit: 'opsPerSecond' | 'bytesPerSecond' | 'maxClients' | 'maxInflight'; held: number; used: (u: UsageReport['tenants'][string]) => number }> = [
  { kind: 'ops', limit: 'opsPerSecond', held: HELD_OPS, used: (u) => u.ops },
  { kind: 'bytes', limit: 'bytesPerSecond', held: HELD_BYTES, used: (u) => u.bytes },
  { kind: 'clients', limit: 'maxClients', held: HELD_CLIENTS, used: (u) => u.clients },
  { kind: 'inflight', limit: 'maxInflight', held: HELD_INFLIGHT, used: (u) => u.inflight },
];

/**
 * A tenant's limits hold over every worker and fleet member together: each member takes a share
 * of each limit, worked out again every BUDGET_PERIOD_MS from every member's last report, so the
 * budget follows the tenant's traffic as it moves between members.
 *
 *   demand   a member a limit held back (or refused a client) wants more: unbounded; any other
 *            wants what it used × GROWTH, at least FLOOR_OF_EVEN of an even share
 *   shares   max-min fair (water filling): the smallest demands are met, the rest of the budget
 *            is divided evenly among the members that want more; what no one wants is divided
 *            evenly among all, so the parts always add up to the whole budget
 *   members  this one, those heard from within SILENT_AFTER_MS, and those expected but not heard
 *            from yet (they are given an even share until they report)
 * Every member computes every share from the same reports, so they agree to within a period.
 */
export class TenantBudgets {
  private readonly peers = new Map<string, { at: number; report: UsageReport }>();
  private timer: NodeJS.Timeout | null = null;
  private lastTick = Date.now();

  constructor(
    private readonly self: string,
    private readonly tenants: () => readonly Tenant[],
    private readonly transport: BudgetTransport,
  ) {}

  start(): void {
    this.timer = setInterval(() => this.tick(), BUDGET_PERIOD_MS);
    this.timer.unref();
    this.tick();
  }

  stop(): void {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
  }

  /** Another member's report. */
  receive(report: UsageReport, now = Date.now()): void {
    if (report.member === this.self || typeof report.tenants !== 'object' || report.tenants === null) return;
    this.peers.set(report.member, { at: now, report });
  }

  /** Reports this member's usage and takes its shares again (every period; tests call it directly). */
  tick(now = Date.now()): void {
    const seconds = Math.max(0.001, (now - this.lastTick) / 1000);
    this.lastTick = now;
    const own: UsageReport = { member: this.self, tenants: {} };
    for (const tenant of this.tenants()) {
      const u: TenantUsage = tenant.takeUsage();
      own.tenants[tenant.name] = { ops: u.ops / seconds, bytes: u.bytes / seconds, clients: u.clients, inflight: u.inflight, held: u.held };
    }
    for (const [member, p] of this.peers) if (now - p.at > SILENT_AFTER_MS) this.peers.delete(member);
    this.transport.send(own);
    const reports = [own, ...[...this.peers.values()].map((p) => p.report)];
    const unheard = Math.max(0, this.transport.expectedMembers() - reports.length);
    for (const tenant of this.tenants()) {
      const budget = tenant.budget;
      const shares = { ops: 1, bytes: 1, clients: 1, inflight: 1 };
      for (const k of KINDS) {
        const whole = budget[k.limit];
        if (whole === null || (reports.length === 1 && unheard === 0)) continue;
        const even = whole / (reports.length + unheard);
        const demands = reports.map((r) => {
          const u = r.tenants[tenant.name];
          if (u === undefined) return even; // a member that does not know the tenant (yet): an even share
          if ((u.held & k.held) !== 0) return Number.POSITIVE_INFINITY;
          return Math.max(k.used(u) * GROWTH, even * FLOOR_OF_EVEN);
        });
        for (let i = 0; i < unheard; i++) demands.push(even);
        shares[k.kind] = waterFill(whole, demands)[0]! / whole;
      }
      tenant.setShares(shares);
    }
  }
}

/**
 * Max-min fair division of `total` among `demands` (water filling): demands below the level are
 * met, the others get the level; what is left when every demand is met is divided evenly among
 * all. The parts add up to `total`.
 */
export function waterFill(total: number, demands: readonly number[]): number[] {
  const n = demands.length;
  const out = new Array<number>(n).fill(0);
  const order = demands.map((d, i) => [d, i] as const).sort((a, b) => a[0] - b[0]);
  let left = total;
  for (let k = 0; k < n; k++) {
    const [demand, i] = order[k]!;
    const part = Math.min(demand, left / (n - k));
    out[i] = part;
    left -= part;
  }
  if (left > 0) for (let i = 0; i < n; i++) out[i] = out[i]! + left / n;
  return out;
}
