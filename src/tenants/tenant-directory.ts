import type { TenantConfig } from '../config/types.js';
import { clockNow } from '../util/read-clock.js';
import { Tenant, type TenantPeers } from './tenant.js';

/** The tenant of users in no tenant (and of clients before AUTH), when tenants are configured: no limits, but counted and given its fair share. */
export const DEFAULT_TENANT = 'default';

/**
 * The tenants of this respool (config tenants[]) and which tenant each configured user belongs to
 * (users[].tenant). With tenants configured, a user in none — and every user made at run time
 * with ACL SETUSER — is in the `default` tenant: no limits, its requests counted and given their
 * fair share beside the others'. With none configured there is no tenant at all (null: one branch
 * on the hot path).
 */
export class TenantDirectory implements TenantPeers {
  private readonly byName = new Map<string, Tenant>();
  private readonly byUser = new Map<string, Tenant>();
  private readonly fallback: Tenant | null;

  constructor(tenants: readonly TenantConfig[], users: ReadonlyArray<{ readonly name: string; readonly tenant?: string }>) {
    for (const config of tenants) this.byName.set(config.name, new Tenant(config, this));
    this.fallback = tenants.length === 0 ? null : new Tenant({ name: DEFAULT_TENANT, keyPrefix: null, limits: { opsPerSecond: null, bytesPerSecond: null, maxClients: null, maxInflight: null } }, this);
    for (const user of users) {
      const tenant = user.tenant === undefined ? undefined : this.byName.get(user.tenant);
      if (tenant !== undefined) this.byUser.set(user.name, tenant);
    }
  }

  /** The tenant of a user (by name; null: not authenticated yet), or null when no tenants are configured. */
  of(user: string | null): Tenant | null {
    return (user === null ? undefined : this.byUser.get(user)) ?? this.fallback;
  }

  /** Every tenant, the default one last. */
  list(): Tenant[] {
    return this.fallback === null ? [] : [...this.byName.values(), this.fallback];
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
    for (const tenant of this.list()) tenant.startTurn();
  };

  /** The last answer of othersBusy, for the tenant and the clock reading it was for: a read callback holds the clock, and its requests ask again. */
  private busyAsked: { tenant: Tenant | null; at: number; busy: boolean } = { tenant: null, at: -1, busy: false };

  othersBusy(tenant: Tenant): boolean {
    const now = clockNow();
    const asked = this.busyAsked;
    if (asked.tenant === tenant && asked.at === now) return asked.busy;
    let busy = this.fallback !== tenant && this.fallback!.busy(now);
    if (!busy) for (const other of this.byName.values()) if (other !== tenant && other.busy(now)) busy = true;
    asked.tenant = tenant;
    asked.at = now;
    asked.busy = busy;
    return busy;
  }

  get size(): number {
    return this.byName.size;
  }
}
