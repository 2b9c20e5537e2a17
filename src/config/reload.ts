// SIGHUP reload: which settings of a freshly loaded config can be applied to the running proxy,
// and which need a restart. The running config object is changed IN PLACE, leaf by leaf, so
// every module that holds it (or one of its groups: ctx.config, Router's config.cluster,
// ReadRouting's config.reads, LeasePools, UpstreamPools) reads the new values at its next
// use; the few modules that copied values at construction get a setter call from
// RespoolProxy.reload (src/server.ts).

import type { Logger } from 'pino';
import type { RespoolConfig, TenantConfig, TenantLimits } from './types.js';

/** Settings (leaf paths, or a prefix ending in ".") that a running proxy cannot change. */
const NEEDS_RESTART: readonly string[] = [
  'listen', 'unixSocket', 'unixSocketMode', 'listenTls', 'upstreams', 'mode', 'admin', 'connectionsPerNode', 'workers', 'supervised', 'upstreamAuth.',
  'cluster.announce', 'cluster.peers', 'cluster.refreshMinIntervalMs', 'cluster.refreshPeriodMs',
  // fleet membership and shared state are set up once (src/fleet)
  'cluster.peersFrom', 'cluster.peersResolveMs', 'cluster.peerCheckMs', 'cluster.peerCheckTimeoutMs',
  'cluster.peerDownAfterMs', 'cluster.peerRejoinAfterMs', 'cluster.fleetState', 'cluster.fleetLeaseMs',
  // circuits, backoff and budgets are built per node when it is first seen
  'resilience.backoffBaseMs', 'resilience.backoffCapMs', 'resilience.dialAttemptsPerWindow', 'resilience.dialWindowMs',
  'resilience.retryBudgetPercent', 'resilience.retryBudgetMinPerSecond', 'resilience.circuitFailureThreshold',
  'clients.acceptRatePerSecond',
  'reads.zoneFrom', 'reads.metadataBaseUrl', 'reads.metadataTimeoutMs',
  'hotKeys.detection.', 'hotKeys.readChoice',
  // mirrored users on the nodes keep their names and passwords until a restart
  'acl.mirrorPrefix', 'acl.mirrorSecret',
  'latency.tracking', 'bigKeys.', 'saturation.cpuSampleMs',
  'upstreamTls.enabled',
  // the pools' bulk places and the memory ceiling (resolved from the cgroup at start) are set up once
  'admission.bulkConnectionsPerNode', 'limits.maxMemory',
  // colocation rules change every stored name they cover: clients would lose sight of their keys mid-run
  'colocate',
  // the near cache's keys, bounds and modes are read once (src/nearcache/near-cache.ts)
  'nearCache.',
  // tenants' names, namespaces and upstreams are set up once (src/tenants, backend.ts); their limits
  // alone change at run time (limitsOnly below)
  'tenants',
];

/** Leaves compared as a whole (lists and maps of their own). */
const WHOLE: ReadonlySet<string> = new Set(['users', 'tenants', 'upstreams', 'cluster.peers', 'cluster.peersFrom', 'reads.prefixes', 'hotKeys.split']);

export interface ReloadPlan {
  /** Leaf paths whose new value is applied. */
  apply: string[];
  /** Leaf paths that changed but keep their running value until a restart. */
  needsRestart: string[];
}

function needsRestart(path: string): boolean {
  return NEEDS_RESTART.some((p) => (p.endsWith('.') ? path.startsWith(p) : path === p || path.startsWith(`${p}.`)));
}

/** Every leaf path of a config ("timeouts.commandMs"), lists and WHOLE groups as leaves. */
function leaves(value: unknown, prefix = '', out = new Map<string, unknown>()): Map<string, unknown> {
  const isHostPort = value !== null && typeof value === 'object' && 'host' in value && 'port' in value;
  if (value !== null && typeof value === 'object' && !Array.isArray(value) && !WHOLE.has(prefix) && !isHostPort) {
    for (const [k, v] of Object.entries(value as Record<string, unknown>)) leaves(v, prefix === '' ? k : `${prefix}.${k}`, out);
  } else {
    out.set(prefix, value);
  }
  return out;
}

/** The same tenants, in the same order, with the same namespaces and upstreams: only their limits differ. */
function limitsOnly(running: readonly TenantConfig[], next: readonly TenantConfig[]): boolean {
  const shape = (list: readonly TenantConfig[]) => JSON.stringify(list.map((t) => ({ ...t, limits: null })));
  return shape(running) === shape(next);
}

/** Which changed settings apply now and which need a restart. */
export function planReload(running: RespoolConfig, next: RespoolConfig): ReloadPlan {
  const a = leaves(running);
  const b = leaves(next);
  const plan: ReloadPlan = { apply: [], needsRestart: [] };
  for (const path of new Set([...a.keys(), ...b.keys()])) {
    if (JSON.stringify(a.get(path)) === JSON.stringify(b.get(path))) continue;
    const restart = path === 'tenants' ? !limitsOnly(running.tenants, next.tenants) : needsRestart(path);
    (restart ? plan.needsRestart : plan.apply).push(path);
  }
  return plan;
}

/** Copies the applicable leaves of `next` into `running`, in place (objects keep their identity). */
export function applyPlan(running: RespoolConfig, next: RespoolConfig, plan: ReloadPlan): void {
  apply: for (const path of [...plan.apply].sort()) {
    const keys = path.split('.');
    let from: unknown = next;
    let to = running as unknown as Record<string, unknown>;
    for (let i = 0; i < keys.length - 1; i++) {
      from = (from as Record<string, unknown> | undefined)?.[keys[i]!];
      if (from === null || typeof from !== 'object') continue apply; // a shorter path set the whole group
      let child = to[keys[i]!];
      if (child === null || typeof child !== 'object') {
        child = {};
        to[keys[i]!] = child;
      }
      to = child as Record<string, unknown>;
    }
    const leaf = keys[keys.length - 1]!;
    const value = (from as Record<string, unknown> | undefined)?.[leaf];
    if (value === undefined) delete to[leaf];
    else to[leaf] = structuredClone(value);
  }
}

/** The running parts a reload talks to (src/server.ts passes them). */
export interface ReloadTargets {
  /** The running config, changed in place. */
  config: RespoolConfig;
  /** Re-levelled by logLevel; the reload line goes here (never rate limited: one per SIGHUP). */
  log: Logger;
  pools: { reconfigure(): void };
  reads: { reconfigure(): void; setOwnZone(zone: string | null, source: string): void; readonly ownZone: string | null };
  hotKeys: {
    addRule(rule: { key?: string; prefix?: string; pattern?: string; copies?: number | null }): unknown;
    removeRule(text: string, kind?: 'key' | 'prefix' | 'pattern'): Promise<boolean>;
  };
  /** The TLS engineer's certificate reload (reads config.tls / config.upstreamTls again); throws on a bad file. */
  reloadTls?: () => void;
  /** The tenants (src/tenants/tenant-directory.ts): their limits changed by the reload. */
  tenants?: { setLimits(name: string, limits: TenantLimits): boolean };
  /** respool's users: the configuration's and the ACL file's read again (src/acl/user-directory.ts); null or why not. */
  users?: { reload(): string | null };
}

export interface ReloadResult {
  applied: string[];
  needsRestart: string[];
  /** Parts that failed to apply (e.g. a TLS certificate that does not parse); the rest applied. */
  failed: string[];
}

type SplitRule = { key?: string; prefix?: string; pattern?: string; copies?: number | null };
const ruleId = (r: SplitRule) => (r.key !== undefined ? `key\u0000${r.key}` : r.prefix !== undefined ? `prefix\u0000${r.prefix}` : `pattern\u0000${r.pattern}`);

/**
 * Applies a validated config to the running proxy without dropping a client: the settings that
 * can change at run time change (in place), the others are logged as needing a restart; the
 * outcome is one `reload_applied` line.
 */
export function reloadProxy(t: ReloadTargets, next: RespoolConfig): ReloadResult {
  const plan = planReload(t.config, next);
  const oldSplit = structuredClone(t.config.hotKeys.split) as SplitRule[];
  applyPlan(t.config, next, plan);
  const touched = (prefix: string) => plan.apply.some((p) => p === prefix || p.startsWith(`${prefix}.`));
  const failed: string[] = [];
  if (touched('timeouts') || touched('resilience')) t.pools.reconfigure();
  if (touched('reads')) {
    t.reads.reconfigure();
    if (touched('reads.zone') && t.config.reads.zone !== null) t.reads.setOwnZone(t.config.reads.zone, 'config');
  }
  if (touched('hotKeys.split')) {
    const newSplit = t.config.hotKeys.split as SplitRule[];
    const keep = new Set(newSplit.map(ruleId));
    for (const r of oldSplit) {
      if (keep.has(ruleId(r))) continue;
      const kind = r.key !== undefined ? 'key' : r.prefix !== undefined ? 'prefix' : 'pattern';
      void t.hotKeys.removeRule((r.key ?? r.prefix ?? r.pattern)!, kind).catch(() => undefined);
    }
    for (const r of newSplit) {
      try {
        t.hotKeys.addRule(r); // adds, or updates the copies of an existing rule
      } catch (err) {
        failed.push(`hotKeys.split ${ruleId(r).replace('\u0000', ' ')}: ${(err as Error).message}`);
      }
    }
  }
  if (touched('tenants')) for (const tenant of t.config.tenants) t.tenants?.setLimits(tenant.name, tenant.limits);
  // The ACL file may have changed on disk: always read it again (with the configuration's users).
  if (t.users !== undefined) {
    const problem = t.users.reload();
    if (problem !== null) failed.push(`users: ${problem.replace(/^ERR /, '')} (the users stay as they were)`);
  }
  // Certificates may have been replaced on disk under the same names: always read them again.
  if (t.reloadTls !== undefined) {
    try {
      t.reloadTls();
    } catch (err) {
      failed.push(`TLS certificates: ${(err as Error).message} (the previous certificates stay in use)`);
    }
  }
  const result = { applied: plan.apply, needsRestart: plan.needsRestart, failed };
  const level = failed.length > 0 ? 'error' : plan.needsRestart.length > 0 ? 'warn' : 'info';
  const what = plan.apply.length === 0 ? 'nothing changed' : `applied ${plan.apply.join(', ')}`;
  const restart = plan.needsRestart.length === 0 ? '' : `; needs a restart (kept as they are): ${plan.needsRestart.join(', ')}`;
  t.log[level]({ event: 'reload_applied', applied: plan.apply, needsRestart: plan.needsRestart, failed }, `config reloaded: ${what}${restart}${failed.length > 0 ? `; failed: ${failed.join('; ')}` : ''}`);
  // Last, so the line above is written at the level the operator was running with.
  if (touched('logLevel')) t.log.level = t.config.logLevel;
  return result;
}
