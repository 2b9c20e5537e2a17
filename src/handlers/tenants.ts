import { encodeArray, encodeBulk, encodeError, encodeInteger, encodeMap, encodeSimple } from '../resp/encode.js';
import { ProxyError } from '../errors.js';
import type { Tenant } from '../tenants/tenant.js';
import { limitPairs } from '../tenants/limit-changes.js';
import type { CommandRequest, HandlerSession } from '../client/handler-session.js';

export const RESPOOL_TENANTS_HELP = [
  'TENANTS', '    Each tenant (config tenants[]): its namespace, limits, clients now and what its clients did.',
  'TENANT SET <name> <limit> <value> [<limit> <value> ...]',
  '    Changes a tenant\'s limits now (ops-per-second, bytes-per-second, max-clients, max-inflight; none: no limit), on every worker and fleet member.',
];

/**
 * RESPOOL TENANT SET name limit value …: the tenant's whole budget changes at once, on every
 * worker (the handler shares the command: workers/peer-commands.ts) and fleet member (the fleet's
 * state: fleet/fleet-tenants.ts). +OK, or an error naming what is wrong.
 */
export function tenantSet(session: HandlerSession, req: CommandRequest, share: (args: readonly Buffer[], reply: Buffer) => void): void {
  const args = req.args;
  if (args.length < 6 || args.length % 2 !== 0 || args[2]!.toString('latin1').toUpperCase() !== 'SET') {
    return session.replyNow(encodeError(ProxyError.respool('RESPOOL TENANT SET <name> <limit> <value> [<limit> <value> ...]')));
  }
  const change = session.ctx.changeTenantLimits;
  if (change === undefined) return session.replyNow(encodeError(ProxyError.respool('no tenants here')));
  const name = args[3]!.toString();
  const changes = limitPairs(args, 4);
  const copy = args.map((a) => Buffer.from(a)); // the read buffer is not ours past this call
  const entry = session.reserve();
  change(name, changes).then(
    (error) => {
      const reply = error === null ? encodeSimple('OK') : encodeError(ProxyError.respool(error));
      if (error === null) share(copy, reply);
      entry.fill(reply);
    },
    (err: Error) => entry.fill(encodeError(ProxyError.respool(`the fleet's state did not take the change: ${err.message}`))),
  );
}

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
      field('held-shed', encodeInteger(s.held.shed)),
      field('held-ms', encodeInteger(Math.round(s.heldMs))),
      field('refused-clients', encodeInteger(s.refusedClients)),
      // the last minute, receive → reply written, as its clients see it (null before any request)
      field('p50-us', number(s.latencyUs === null ? null : Math.round(s.latencyUs.p50))),
      field('p99-us', number(s.latencyUs === null ? null : Math.round(s.latencyUs.p99))),
      // a saturated node slows the lowest priority first (tenants/tenant-shedding.ts): to what rate, and why
      field('priority', encodeInteger(s.priority)),
      field('shed-ops-per-second', number(s.shed === null ? null : Math.round(s.shed.opsPerSecond))),
      field('shed-reason', bulk(s.shed === null ? null : s.shed.why)),
    ],
    protocol,
  );
}
