import type { TenantLimits } from '../config/types.js';
import type { FleetDoc, FleetState } from './fleet-state.js';

/** What the fleet's tenant limits change here: the tenants by name (tenants/tenant-directory.ts). */
export interface TenantLimitTarget {
  setLimits(name: string, limits: TenantLimits): boolean;
}

/**
 * Tenants' limits changed at run time (RESPOOL TENANT SET, POST /tenants) through any member, in
 * the fleet's shared state (fleet-state.ts), as split rules and users are: every member applies
 * them within a beat, and a member started later starts with them.
 *
 *   state : doc.tenants = { name → its whole limits } — the latest change of each tenant
 *   apply : each member sets a tenant's limits when the state's differ from what it applied last
 *           (a config reload in between changes them here until the next change in the state)
 */
export class FleetTenants {
  private readonly applied = new Map<string, string>();

  constructor(
    private readonly state: FleetState,
    private readonly target: TenantLimitTarget,
  ) {
    state.onDoc((doc) => this.apply(doc));
  }

  /** A tenant's new limits, for the whole fleet: resolves once the state holds them. */
  async share(name: string, limits: TenantLimits): Promise<void> {
    await this.state.update((doc) => ({ ...doc, tenants: { ...(doc.tenants ?? {}), [name]: limits } }));
  }

  private apply(doc: FleetDoc): void {
    for (const [name, limits] of Object.entries(doc.tenants ?? {})) {
      const text = JSON.stringify(limits);
      if (this.applied.get(name) === text) continue;
      this.applied.set(name, text);
      this.target.setLimits(name, limits);
    }
  }
}
