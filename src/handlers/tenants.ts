import { encodeArray, encodeBulk, encodeInteger, encodeMap } from '../resp/encode.js';
import type { Tenant } from '../tenants/tenant.js';
import type { HandlerSession } from '../client/handler-session.js';

export const RESPOOL_TENANTS_HELP = ['TENANTS', '    Each tenant (config tenants[]): its namespace, limits, clients now and what its clients did.'];

/**
 * RESPOOL TENANTS: one map per tenant (a flat array in RESP2), in config order — its name,
 * keyPrefix, its own upstreams (null: the main ones), limits (null: none), clients and replies owed now, clients held back now, requests
 * and bytes so far, how often and how long its limits held its clients back, connections refused.
 */
export function tenantsReply(session: HandlerSession): Buffer {
  const protocol = session.state.protocol;
  return encodeArray(session.ctx.tenants.list().map((t) => tenantMap(t, protocol)));
}

function tenantMap(t: Tenant, protocol: 2 | 3): Buffer {
  const s = t.snapshot();
  const bulk = (v: string | null) => encodeBulk(v, protocol);
  const number = (v: number | null) => (v === null ? encodeBulk(null, protocol) : Number.isInteger(v) ? encodeInteger(v) : bulk(String(v)));
  const field = (name: string, value: Buffer): [Buffer, Buffer] => [bulk(name), value];
  return encodeMap(
    [
      field('name', bulk(s.name)),
      field('key-prefix', bulk(s.keyPrefix)),
      field('upstreams', bulk(s.upstreams === null ? null : s.upstreams.join(','))), // null: the main upstreams
      field('ops-per-second', number(s.limits.opsPerSecond)),
      field('bytes-per-second', number(s.limits.bytesPerSecond)),
      field('max-clients', number(s.limits.maxClients)),
      field('max-inflight', number(s.limits.maxInflight)),
      // this worker's or member's part of each limit (tenants/tenant-budgets.ts): the whole when it is alone
      field('ops-per-second-here', number(s.allowed.opsPerSecond === null ? null : Math.round(s.allowed.opsPerSecond))),
      field('bytes-per-second-here', number(s.allowed.bytesPerSecond === null ? null : Math.round(s.allowed.bytesPerSecond))),
      field('max-clients-here', number(s.allowed.maxClients)),
      field('max-inflight-here', number(s.allowed.maxInflight)),
      field('clients', encodeInteger(s.clients)),
      field('inflight', encodeInteger(s.inflight)),
      field('held-clients', encodeInteger(s.heldClients)),
      field('requests', encodeInteger(s.requests)),
      field('bytes-in', encodeInteger(s.bytesIn)),
      field('bytes-out', encodeInteger(s.bytesOut)),
      field('held-ops', encodeInteger(s.held.ops)),
      field('held-bytes', encodeInteger(s.held.bytes)),
      field('held-inflight', encodeInteger(s.held.inflight)),
      field('held-share', encodeInteger(s.held.share)),
      field('held-ms', encodeInteger(Math.round(s.heldMs))),
      field('refused-clients', encodeInteger(s.refusedClients)),
    ],
    protocol,
  );
}
