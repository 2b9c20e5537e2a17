import type { TenantConfig, TenantLimits } from '../config/types.js';
import { clockNow } from '../util/read-clock.js';
import { Tenant, type TenantPeers } from './tenant.js';

/** The tenant of users in no tenant (and of clients before AUTH), when tenants are configured: no limits, but counted and given its fair share. */
const DEFAULT_TENANT = 'default';

/**
 * The tenants of this respool (config tenants[]) and which tenant each configured user belongs to
 * (users[].tenant). With tenants configured, a user in none — and every user made at run time
 * with ACL SETUSER — is in the `default` tenant: no limits, its requests counted and given their
 * fair share beside the others'. With none configured there is no tenant at all (null: one branch
 * on the hot path).
 */
export class TenantDirectory implements TenantPeers {
  private readonly byUser = new Map<string, Tenant>();
  private readonly fallback: Tenant | null;
  /** Every tenant, the default one last (none without tenants configured). */
  private readonly all: readonly Tenant[];

  constructor(tenants: readonly TenantConfig[], users: ReadonlyArray<{ readonly name: string; readonly tenant?: string }>) {
    const byName = new Map(tenants.map((config) => [config.name, new Tenant(config, this)]));
    this.fallback = tenants.length === 0 ? null : new Tenant({ name: DEFAULT_TENANT, keyPrefix: null, upstream: null, limits: { opsPerSecond: null, bytesPerSecond: null, maxClients: null, maxInflight: null } }, this);
    this.all = this.fallback === null ? [] : [...byName.values(), this.fallback];
    for (const user of users) {
      const tenant = user.tenant === undefined ? undefined : byName.get(user.tenant);
      if (tenant !== undefined) this.byUser.set(user.name, tenant);
    }
  }

  /** The tenant of a user (by name; null: not authenticated yet), or null when no tenants are configured. */
  of(user: string | null): Tenant | null {
    return (user === null ? undefined : this.byUser.get(user)) ?? this.fallback;
  }

  /** Every tenant, the default one last. */
  list(): readonly Tenant[] {
    return this.all;
  }

  /** The tenant of this name (the configured ones and `default`), if there is one. */
  get(name: string): Tenant | undefined {
    return this.all.find((t) => t.name === name);
  }

  /** A tenant's new budget (RESPOOL TENANT SET, POST /tenants, a reload, the fleet's state); false: no such tenant. */
  setLimits(name: string, limits: TenantLimits): boolean {
    const tenant = this.get(name);
    if (tenant === undefined) return false;
    tenant.setLimits(limits);
    return true;
  }

  private turnScheduled = false;

  admittedInTurn(): void {
    if (this.turnScheduled) return;
    this.turnScheduled = true;
    setImmediate(this.startTurn);
  }

  /** After this turn's reads (setImmediate): every tenant's share of a turn starts again. */
  private readonly startTurn = (): void => {
    this.turnScheduled = false;
    for (const tenant of this.all) tenant.startTurn();
  };

  /** The last answer of othersBusy, for the tenant and the clock reading it was for: a read callback holds the clock, and its requests ask again. */
  private busyAsked: { tenant: Tenant | null; at: number; busy: boolean } = { tenant: null, at: -1, busy: false };

  othersBusy(tenant: Tenant): boolean {
    const now = clockNow();
    const asked = this.busyAsked;
    if (asked.tenant === tenant && asked.at === now) return asked.busy;
    let busy = false;
    for (const other of this.all) if (other !== tenant && other.busy(now)) busy = true;
    asked.tenant = tenant;
    asked.at = now;
    asked.busy = busy;
    return busy;
  }
}
