import cluster from 'node:cluster';
import type { Logger } from 'pino';
import type { FleetState } from '../fleet/fleet-state.js';
import type { Membership } from '../fleet/membership.js';
import type { Tenant } from '../tenants/tenant.js';
import { TenantBudgets, type UsageReport } from '../tenants/tenant-budgets.js';

/** A worker's usage report, through the supervisor to every other worker (supervisor.ts relays it). */
export const TENANT_USAGE_MESSAGE = 'respool:tenant-usage';
/** The fleet's bus message of the same (fleet-state.ts publish/on). */
const FLEET_USAGE = 'tenant-usage';

/** The number of workers beside this one, itself included (the supervisor tells each worker: supervisor.ts workerCount); 1 without workers. */
function workersInGroup(): number {
  const n = Number(process.env['RESPOOL_WORKER_COUNT'] ?? '1');
  return Number.isInteger(n) && n > 0 ? n : 1;
}

/**
 * Divides the tenants' limits among the workers and fleet members (tenants/tenant-budgets.ts)
 * when there is more than one of them and some tenant has a limit; null otherwise (each member
 * then holds the whole limit, as it is alone). Reports go over the fleet's bus when the fleet
 * shares state (every worker of every member is a member there), else between workers over IPC.
 */
export function startTenantBudgets(deps: {
  tenants: readonly Tenant[];
  fleetState: FleetState | null;
  membership: Membership | null;
  log: Logger;
}): TenantBudgets | null {
  const { tenants, fleetState, membership } = deps;
  const limited = tenants.some((t) => Object.values(t.budget).some((v) => v !== null));
  const workers = workersInGroup();
  if (!limited || (workers === 1 && membership === null)) return null;
  if (membership !== null && fleetState === null) {
    deps.log.warn({ event: 'tenant_budgets' }, 'tenants: the fleet shares no state (cluster.fleetState none): each member holds its tenants to the whole of their limits');
    if (workers === 1) return null;
  }
  let budgets: TenantBudgets;
  if (fleetState !== null && membership !== null) {
    budgets = new TenantBudgets(fleetState.memberId, () => tenants, {
      send: (report) => void fleetState.publish({ t: FLEET_USAGE, report }).catch(() => {}),
      expectedMembers: () => Math.max(1, membership.liveIds().length) * workers,
    });
    fleetState.on(FLEET_USAGE, (message) => budgets.receive(message['report'] as UsageReport));
  } else {
    budgets = new TenantBudgets(`w${process.env['RESPOOL_WORKER_INDEX'] ?? '0'}`, () => tenants, {
      send: (report) => {
        if (cluster.isWorker && process.send !== undefined) process.send({ type: TENANT_USAGE_MESSAGE, report });
      },
      expectedMembers: () => workers,
    });
    process.on('message', (msg: unknown) => {
      const m = msg as { type?: string; report?: UsageReport } | null;
      if (m?.type === TENANT_USAGE_MESSAGE && m.report !== undefined) budgets.receive(m.report);
    });
  }
  budgets.start();
  return budgets;
}
