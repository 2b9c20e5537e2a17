import { jsonResponse, type AdminRoute } from './admin-server.js';
import { readJsonBody } from './hot-key-routes.js';

/**
 * POST /tenants  {"name": "teama", "limits": {"opsPerSecond": 5000, "bytesPerSecond": "20mb", "maxClients": null}}
 * changes a tenant's limits now, as RESPOOL TENANT SET does (null: no limit; limits not named
 * stay); with workers the supervisor passes it to each, in a fleet with shared state it reaches
 * every member. GET /tenants (observe-routes.ts) shows them.
 */
export function tenantRoutes(change: (name: string, changes: ReadonlyArray<readonly [string, unknown]>) => Promise<string | null>): AdminRoute[] {
  return [{
    method: 'POST',
    path: '/tenants',
    handler: async (req) => {
      let body: unknown;
      try {
        body = await readJsonBody(req);
      } catch (err) {
        return jsonResponse(400, { error: `body must be JSON: ${(err as Error).message}` });
      }
      const b = body as { name?: unknown; limits?: unknown } | null;
      if (b === null || typeof b !== 'object' || typeof b.name !== 'string' || b.limits === null || typeof b.limits !== 'object' || Array.isArray(b.limits)) {
        return jsonResponse(400, { error: 'body must be a JSON object like {"name": "teama", "limits": {"opsPerSecond": 5000}}' });
      }
      try {
        const error = await change(b.name, Object.entries(b.limits as Record<string, unknown>));
        return error === null ? jsonResponse(200, { ok: true }) : jsonResponse(error.startsWith('no tenant') ? 404 : 400, { error });
      } catch (err) {
        return jsonResponse(409, { error: `the fleet's state did not take the change: ${(err as Error).message}` });
      }
    },
  }];
}
