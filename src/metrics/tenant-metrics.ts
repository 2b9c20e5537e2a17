import type { Counter, Gauge } from 'prom-client';
import type { MetricDefinition } from './metric-definitions.js';

// A tenant's metrics (config tenants[], src/tenants): one series per configured tenant, copied
// from the tenant's plain counts when the registry is read — a tenant counts in plain numbers on
// the hot path (src/tenants/tenant.ts), never through a labelled child.

export const TENANT_METRIC_DEFINITIONS = {
  tenant_requests_total: {
    type: 'counter',
    help: 'Requests a tenant\'s clients handed on.',
    labelNames: ['tenant'],
  },
  tenant_bytes_total: {
    type: 'counter',
    help: 'Bytes a tenant\'s clients sent (in: requests) and were sent (out: replies and pushes): what tenants[].limits.bytesPerSecond counts.',
    labelNames: ['tenant', 'direction'],
  },
  tenant_clients: {
    type: 'gauge',
    help: 'Connections authenticated as a tenant\'s users now.',
    labelNames: ['tenant'],
  },
  tenant_held_total: {
    type: 'counter',
    help: 'Times a tenant\'s client was held back by one of its limits (ops: opsPerSecond, bytes: bytesPerSecond, inflight: maxInflight), for its fair share beside other busy tenants (share), or because a node is saturated and its priority is low (shed).',
    labelNames: ['tenant', 'limit'],
  },
  tenant_held_seconds_total: {
    type: 'counter',
    help: 'Time during which some client of a tenant was held back by its limits.',
    labelNames: ['tenant'],
  },
  tenant_shed_ops_per_second: {
    type: 'gauge',
    help: 'The requests per second a tenant is slowed to while a node is saturated (tenants[].priority: the lowest first); no series while it is not slowed.',
    labelNames: ['tenant'],
  },
  tenant_latency_last_minute_seconds: {
    type: 'gauge',
    help: 'A tenant\'s requests over the last minute, receive to reply written (as its clients see them): p50 and p99.',
    labelNames: ['tenant', 'quantile'],
  },
  tenant_refused_clients_total: {
    type: 'counter',
    help: 'Connections or AUTHs refused for a tenant\'s limits.maxClients.',
    labelNames: ['tenant'],
  },
} as const satisfies Record<string, MetricDefinition>;

/** What the tenants' metrics read of a tenant (src/tenants/tenant.ts Tenant). */
export interface TenantFigures {
  readonly name: string;
  readonly clients: number;
  readonly counts: {
    readonly requests: number;
    readonly bytesIn: number;
    readonly bytesOut: number;
    readonly heldMs: number;
    readonly held: Readonly<Record<string, number>>;
    readonly refusedClients: number;
  };
  /** Last-minute p50/p99 in µs, or null before any request. */
  latencyUs(): { p50: number; p99: number } | null;
  /** The rate it is slowed to while a node is saturated, or null. */
  readonly shedOpsPerSecond: number | null;
}

/** The handles of the tenants' metrics (metrics.ts Metrics.raw). */
interface TenantHandles {
  readonly tenant_requests_total: Counter<string>;
  readonly tenant_bytes_total: Counter<string>;
  readonly tenant_held_total: Counter<string>;
  readonly tenant_held_seconds_total: Counter<string>;
  readonly tenant_refused_clients_total: Counter<string>;
  readonly tenant_clients: Gauge<string>;
  readonly tenant_shed_ops_per_second: Gauge<string>;
  readonly tenant_latency_last_minute_seconds: Gauge<string>;
}

/** The tenants' figures, copied into respool_tenant_* when the registry is read. */
export function tenantsAtScrape(raw: TenantHandles, list: () => ReadonlyArray<TenantFigures>): void {
  const counter = (c: Counter<string>, read: (t: TenantFigures) => Array<[string[], number]>) => {
    (c as unknown as { collect: () => void }).collect = () => {
      c.reset();
      for (const t of list()) for (const [labels, value] of read(t)) c.labels(...labels).inc(value);
    };
  };
  counter(raw.tenant_requests_total, (t) => [[[t.name], t.counts.requests]]);
  counter(raw.tenant_bytes_total, (t) => [[[t.name, 'in'], t.counts.bytesIn], [[t.name, 'out'], t.counts.bytesOut]]);
  counter(raw.tenant_held_total, (t) => Object.entries(t.counts.held).map(([limit, n]): [string[], number] => [[t.name, limit], n]));
  counter(raw.tenant_held_seconds_total, (t) => [[[t.name], t.counts.heldMs / 1000]]);
  counter(raw.tenant_refused_clients_total, (t) => [[[t.name], t.counts.refusedClients]]);
  const gauge = (g: Gauge<string>, read: (t: TenantFigures) => Array<[string[], number]>) => {
    (g as unknown as { collect: () => void }).collect = () => {
      g.reset();
      for (const t of list()) for (const [labels, value] of read(t)) g.labels(...labels).set(value);
    };
  };
  gauge(raw.tenant_clients, (t) => [[[t.name], t.clients]]);
  gauge(raw.tenant_shed_ops_per_second, (t) => (t.shedOpsPerSecond === null ? [] : [[[t.name], t.shedOpsPerSecond]]));
  gauge(raw.tenant_latency_last_minute_seconds, (t) => {
    const l = t.latencyUs();
    return l === null ? [] : [[[t.name, '0.5'], l.p50 / 1e6], [[t.name, '0.99'], l.p99 / 1e6]];
  });
}
