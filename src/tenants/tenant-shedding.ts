import type { Tenant } from './tenant.js';

/** How often shedding looks at the nodes and the tenants again. */
export const SHED_PERIOD_MS = 500;
/** Each period a node stays saturated, the shed tenants' rate is cut to this share … */
const CUT = 0.7;
/** … down to this share of the rate they ran at when shedding began (at least MIN_RATE). */
const FLOOR = 0.1;
const MIN_RATE = 1;
/** Each period without a saturated node, a shed tenant's rate grows by this much; past LIFT_ABOVE × its rate at the start, it is no longer shed. */
const RECOVER = 1.25;
const LIFT_ABOVE = 1.5;

/** A saturated node and why (observe/node-saturation.ts). */
export interface SaturatedNode {
  node: string;
  reasons: readonly string[];
}

/**
 * When a node of the main upstreams is saturated (respool's own p99 / CPU rule,
 * observe/node-saturation.ts), the busy tenants of the lowest `priority` are slowed first: their
 * requests per second are cut by CUT each period the node stays saturated, down to FLOOR of the
 * rate they had when it began; only when every tenant of that priority is at its floor are the
 * tenants of the next priority slowed. Tenants of the highest busy priority are never slowed
 * here (with one priority among the busy tenants, nobody is). Once no node is saturated the cut
 * grows back by RECOVER each period and is lifted. The slowing is back-pressure, as the rate
 * limits are (Tenant.setShedRate): nobody is refused.
 *
 *   busy      a tenant that handed a request on during the last period (its requests counter moved)
 *   levels    priorities of the busy tenants, lowest first; the top one is spared
 *   state     per shed tenant: its rate at the start, the rate it is held to now, and why
 *   only      tenants on the main upstreams (their own upstreams' nodes are not watched)
 */
export class TenantShedding {
  private readonly shed = new Map<Tenant, { startRate: number; rate: number }>();
  private readonly lastRequests = new Map<Tenant, number>();
  private lastTick = Date.now();
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly tenants: () => readonly Tenant[],
    private readonly saturated: () => readonly SaturatedNode[],
    /** Told when a tenant starts or stops being slowed, and why (an event line). */
    private readonly report: (tenant: Tenant, rate: number | null, why: string) => void,
  ) {}

  start(): void {
    this.timer = setInterval(() => this.tick(), SHED_PERIOD_MS);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
  }

  tick(now = Date.now()): void {
    const seconds = Math.max(0.001, (now - this.lastTick) / 1000);
    this.lastTick = now;
    const rates = new Map<Tenant, number>();
    for (const t of this.tenants()) {
      if (t.upstreams !== null) continue;
      const before = this.lastRequests.get(t) ?? t.counts.requests;
      this.lastRequests.set(t, t.counts.requests);
      rates.set(t, (t.counts.requests - before) / seconds);
    }
    const nodes = this.saturated();
    if (nodes.length === 0) return this.recover();
    const why = nodes.map((n) => `${n.node} saturated (${n.reasons.join(', ')})`).join('; ');
    const busy = [...rates].filter(([t, rate]) => rate > 0 || this.shed.has(t)).map(([t]) => t);
    const levels = [...new Set(busy.map((t) => t.priority))].sort((a, b) => a - b);
    for (const level of levels.slice(0, -1)) {
      const tenants = busy.filter((t) => t.priority === level);
      let cut = false;
      for (const t of tenants) {
        const state = this.shed.get(t) ?? { startRate: Math.max(MIN_RATE, rates.get(t)!), rate: Math.max(MIN_RATE, rates.get(t)!) };
        const floor = Math.max(MIN_RATE, state.startRate * FLOOR);
        if (state.rate <= floor && this.shed.has(t)) continue;
        state.rate = Math.max(floor, state.rate * CUT);
        this.shed.set(t, state);
        t.setShedRate(state.rate, why);
        this.report(t, state.rate, why);
        cut = true;
      }
      if (cut) return; // this level was slowed further: the next waits until it is at its floor
    }
  }

  /** No node saturated: each shed tenant's rate grows back, and is lifted once well above where it began. */
  private recover(): void {
    for (const [t, state] of this.shed) {
      state.rate *= RECOVER;
      if (state.rate >= state.startRate * LIFT_ABOVE) {
        this.shed.delete(t);
        t.setShedRate(null, null);
        this.report(t, null, 'no node saturated');
      } else {
        t.setShedRate(state.rate, t.shedWhy);
      }
    }
  }
}
