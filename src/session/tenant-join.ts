import type { ServerContext } from '../client/server-context.js';
import type { ClientState } from '../client/client-state.js';
import type { ReplyQueue } from '../client/reply-queue.js';
import type { TenantJoin } from '../client/handler-session.js';
import { moveClient, type Tenant } from '../tenants/tenant.js';

/** It holds something on its upstreams beyond single requests: subscriptions, a transaction, a lease, tracking. */
function holdsUpstreamState(s: ClientState): boolean {
  return (s.subscriptions !== null && s.subscriptions.total() > 0) || s.transaction !== null || s.lane !== null || s.lease !== null || s.tracking !== null;
}

/**
 * A client becomes one of `tenant`'s (null: none): its replies owed move to the tenant's meter
 * (src/tenants/tenant.ts), and its context becomes the tenant's — another set of upstreams for a
 * tenant with its own (ServerContext.contextOf). With `mayRefuse`: 'full' when the tenant has no
 * room, 'elsewhere' when the client holds state on the old upstreams that cannot follow it
 * there. Else the context the client is to use from now on.
 */
export function joinTenant(session: { readonly state: ClientState; readonly ctx: ServerContext }, replies: ReplyQueue, tenant: Tenant | null, mayRefuse: boolean): ServerContext | Exclude<TenantJoin, 'joined'> {
  const state = session.state;
  const was = state.tenant;
  if (tenant === was) return session.ctx;
  const ctx = session.ctx.contextOf?.(tenant) ?? session.ctx;
  if (mayRefuse && ctx !== session.ctx && holdsUpstreamState(state)) return 'elsewhere';
  if (tenant !== null && mayRefuse && !tenant.hasRoom()) {
    tenant.refused();
    return 'full';
  }
  moveClient(was, tenant, replies.length);
  state.tenant = tenant;
  replies.owed = tenant?.inflight ?? null;
  return ctx;
}
