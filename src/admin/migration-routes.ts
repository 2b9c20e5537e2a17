import type { AdminRequest, AdminResponse } from './admin-server.js';
import { readJsonBody } from './hot-key-routes.js';
import { MigrationRefusal, type Migration } from '../migration/migration.js';
import { MigrationMember } from '../migration/migration-member.js';
import { FleetMigration } from '../migration/fleet-migration.js';
import type { MigrationHandle } from '../migration/migration-process.js';
import { parseAddress } from '../handlers/respool-migrate.js';

// The admin HTTP routes of a live migration (src/migration), as RESPOOL MIGRATE through respool.

type Route = { method: string; path: string; handler: (req: AdminRequest) => Promise<AdminResponse> | AdminResponse };

/** A step's answer: 200 with its result, 409 with a refusal's words (nothing changed), 500 otherwise. */
async function step(work: () => Promise<unknown>): Promise<AdminResponse> {
  try {
    return { status: 200, body: (await work()) ?? { ok: true } };
  } catch (err) {
    return { status: err instanceof MigrationRefusal ? 409 : 500, body: { error: (err as Error).message } };
  }
}

/**
 * Admin routes:
 *   GET  /migration                                    STATUS (JSON)
 *   POST /migration/start   {"target": "host:port", "merge": false}
 *   POST /migration/verify | /migration/cutover | /migration/abort
 * With workers, the supervisor sends these to worker 0, the coordinator; another worker shows the
 * coordinator's last STATUS and refuses the steps (503).
 */
export function migrationRoutes(handle: MigrationHandle): Route[] {
  if (handle instanceof MigrationMember) {
    const elsewhere = () => ({ status: 503, body: { error: 'the migration runs on worker 0 (the coordinator), which is not up; try again once it is' } });
    return [
      { method: 'GET', path: '/migration', handler: () => ({ status: 200, body: handle.status() }) },
      ...['start', 'verify', 'cutover', 'abort'].map((step) => ({ method: 'POST', path: `/migration/${step}`, handler: elsewhere })),
    ];
  }
  // In a fleet: the steps run here unless another member runs the migration (409 with its address).
  const migration = handle instanceof FleetMigration ? handle.local : handle;
  const here = (work: () => Promise<unknown>) => () => {
    const elsewhere = handle instanceof FleetMigration ? handle.coordinatorElsewhere() : null;
    return elsewhere === null ? step(work) : { status: 409, body: { error: `member ${elsewhere} runs the migration: send this there` } };
  };
  return [
    { method: 'GET', path: '/migration', handler: () => ({ status: 200, body: handle.status() }) },
    {
      method: 'POST',
      path: '/migration/start',
      handler: async (req) => {
        let body: { target?: unknown; merge?: unknown };
        try {
          body = (await readJsonBody(req)) as typeof body;
        } catch (err) {
          return { status: 400, body: { error: (err as Error).message } };
        }
        const target = typeof body.target === 'string' ? parseAddress(body.target) : null;
        if (target === null) return { status: 400, body: { error: 'give {"target": "host:port"}' } };
        return step(() => migration.start({ target, merge: body.merge === true }));
      },
    },
    { method: 'POST', path: '/migration/verify', handler: here(() => migration.verifyNow()) },
    { method: 'POST', path: '/migration/cutover', handler: here(async () => ({ pauseMs: await migration.cutover() })) },
    { method: 'POST', path: '/migration/abort', handler: here(() => migration.abort()) },
  ];
}
