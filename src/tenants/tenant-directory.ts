import type { TenantConfig } from '../config/types.js';
import { Tenant } from './tenant.js';

/**
 * The tenants of this respool (config tenants[]) and which tenant each configured user belongs to
 * (users[].tenant). A user not in a tenant — and every user made at run time with ACL SETUSER —
 * belongs to the default tenant: no limits, nothing counted (null, one branch on the hot path).
 */
export class TenantDirectory {
  private readonly byName = new Map<string, Tenant>();
  private readonly byUser = new Map<string, Tenant>();

  constructor(tenants: readonly TenantConfig[], users: ReadonlyArray<{ readonly name: string; readonly tenant?: string }>) {
    for (const config of tenants) this.byName.set(config.name, new Tenant(config));
    for (const user of users) {
      const tenant = user.tenant === undefined ? undefined : this.byName.get(user.tenant);
      if (tenant !== undefined) this.byUser.set(user.name, tenant);
    }
  }

  /** The tenant of a user (by name), or null for the default tenant. */
  of(user: string | null): Tenant | null {
    return user === null ? null : (this.byUser.get(user) ?? null);
  }

  list(): Tenant[] {
    return [...this.byName.values()];
  }

  get size(): number {
    return this.byName.size;
  }
}
