import type { AdminRoute } from './admin-server.js';
import { jsonResponse } from './admin-server.js';
import type { BufferedBytes } from '../client/memory-ceiling.js';
import type { LaneClass } from '../client/lane-class.js';

/** One client as GET /clients shows it (a ClientSession, read through this narrow view). */
export interface ClientFacts {
  readonly id: number;
  readonly address: string;
  readonly name: string;
  readonly laneClass: LaneClass;
  /** Replies owed (its requests handed on and not yet answered and written). */
  readonly pending: number;
  outputBytes(): number;
  queryBytes(): number;
}

export interface ClientRouteDeps {
  clients: () => Iterable<ClientFacts>;
  /** limits.maxMemory as resolved (0 = off) and the memory ceiling's last count (client/memory-ceiling.ts). */
  memory: { readonly limit: number; readonly buffered: BufferedBytes };
  /** Requests in flight per node and lane (UpstreamPools.inflightByLane). */
  lanes: () => Map<string, { interactive: number; bulk: number }>;
}

/** Clients shown by GET /clients: the ones holding the most. */
const TOP = 10;

/**
 * GET /clients — what respool holds for its clients, for operators and the status page:
 *   memory : limits.maxMemory and what it counts (output and queued requests per lane class, the
 *            links' buffers)
 *   lanes  : requests in flight on each node's interactive and bulk links
 *   inflight / output : the TOP clients owing the most replies, and those holding the most output
 */
export function clientRoutes(deps: ClientRouteDeps): AdminRoute[] {
  return [{
    method: 'GET',
    path: '/clients',
    handler: () => {
      const rows: Array<ReturnType<typeof row>> = [];
      const classes: Record<LaneClass, number> = { interactive: 0, bulk: 0 };
      for (const c of deps.clients()) {
        classes[c.laneClass]++;
        if (c.pending > 0 || c.outputBytes() > 0 || c.queryBytes() > 0) rows.push(row(c));
      }
      const top = (by: (r: ReturnType<typeof row>) => number) => [...rows].filter((r) => by(r) > 0).sort((a, b) => by(b) - by(a)).slice(0, TOP);
      return jsonResponse(200, {
        memory: { limit: deps.memory.limit, ...deps.memory.buffered },
        classes,
        lanes: [...deps.lanes()].map(([node, n]) => ({ node, ...n })),
        inflight: top((r) => r.pending),
        output: top((r) => r.outputBytes),
      });
    },
  }];
}

function row(c: ClientFacts) {
  return { id: c.id, address: c.address, name: c.name, class: c.laneClass, pending: c.pending, outputBytes: c.outputBytes(), queryBytes: c.queryBytes() };
}
