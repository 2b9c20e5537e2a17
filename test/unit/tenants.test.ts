import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { ConfigError, parseCommandLine } from '../../src/config/load-config.js';
import { TokenBucket } from '../../src/tenants/token-bucket.js';
import { holdClock, releaseClock } from '../../src/util/read-clock.js';
import { INFLIGHT_SHARE, TURN_SHARE, Tenant, moveClient, type TenantClient } from '../../src/tenants/tenant.js';
import { TenantDirectory } from '../../src/tenants/tenant-directory.js';
import type { TenantConfig } from '../../src/config/types.js';

const dir = mkdtempSync(join(tmpdir(), 'respool-tenants-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let files = 0;

function load(yaml: string, env: NodeJS.ProcessEnv = {}) {
  const file = join(dir, `t${++files}.yaml`);
  writeFileSync(file, yaml);
  const r = parseCommandLine(['--config', file, '--upstream', '127.0.0.1:7000'], env);
  if (r.kind !== 'run') throw new Error(`expected run, got ${r.kind}`);
  return r.config;
}

function loadError(yaml: string): string {
  try {
    load(yaml);
  } catch (err) {
    if (err instanceof ConfigError) return err.message;
    throw err;
  }
  throw new Error('the config loaded');
}

const limits = (l: Partial<TenantConfig['limits']> = {}): TenantConfig['limits'] => ({ opsPerSecond: null, bytesPerSecond: null, maxClients: null, maxInflight: null, ...l });

describe('tenants in the config', () => {
  it('gives each user its tenant and the tenant\'s namespace', () => {
    const config = load(`
tenants:
  - { name: teama, keyPrefix: "a:", limits: { opsPerSecond: 500, maxClients: 3 } }
  - { name: teamb, limits: { bytesPerSecond: 1mb, maxInflight: 10 } }
users:
  - { name: default, password: admin }
  - { name: alice, password: pa, tenant: teama }
  - { name: bob, password: pb, tenant: teamb, keyPrefix: "b:" }
`);
    expect(config.tenants).toEqual([
      { name: 'teama', keyPrefix: 'a:', upstream: null, priority: 0, limits: limits({ opsPerSecond: 500, maxClients: 3 }) },
      { name: 'teamb', keyPrefix: null, upstream: null, priority: 0, limits: limits({ bytesPerSecond: 1024 * 1024, maxInflight: 10 }) },
    ]);
    expect(config.users.find((u) => u.name === 'alice')).toEqual({ name: 'alice', password: 'pa', tenant: 'teama' }); // the namespace is the tenant's
    expect(config.users.find((u) => u.name === 'bob')).toMatchObject({ tenant: 'teamb', keyPrefix: 'b:' });
    const directory = new TenantDirectory(config.tenants, config.users);
    expect(directory.of('alice')?.name).toBe('teama');
    expect(directory.of('default')?.name).toBe('default'); // users in no tenant, and clients before AUTH
    expect(directory.of(null)?.name).toBe('default');
    expect(directory.list().map((t) => t.name)).toEqual(['teama', 'teamb', 'default']);
    expect(new TenantDirectory([], config.users).of('alice')).toBeNull(); // no tenants configured: none at all
  });

  it('reads a tenant\'s own upstreams: seeds, mode, upstreamAuth (from the environment too), upstreamTls', () => {
    const config = load(`
tenants:
  - name: own
    upstreams: ["10.0.0.5:6379", "10.0.0.6:6380"]
    mode: cluster
    upstreamAuth: { username: ownapp, passwordEnv: OWN_UPSTREAM_PASSWORD }
  - { name: solo, upstreams: ["10.0.0.7:6379"], upstreamTls: { enabled: true, servername: cache.internal } }
`, { OWN_UPSTREAM_PASSWORD: 'from-env' });
    expect(config.tenants[0]!.upstream).toEqual({
      upstreams: [{ host: '10.0.0.5', port: 6379 }, { host: '10.0.0.6', port: 6380 }],
      mode: 'cluster',
      upstreamAuth: { username: 'ownapp', password: 'from-env' },
      upstreamTls: { enabled: false, ca: null, cert: null, key: null, servername: null, rejectUnauthorized: true },
    });
    expect(config.tenants[1]!.upstream).toMatchObject({ mode: 'auto', upstreamAuth: null, upstreamTls: { enabled: true, servername: 'cache.internal' } });
    expect(new TenantDirectory(config.tenants, config.users).list()[0]!.snapshot().upstreams).toEqual(['10.0.0.5:6379', '10.0.0.6:6380']);
  });

  it('refuses what cannot work, with a clear error', () => {
    expect(loadError('tenants: [{ name: a, priority: high }]')).toMatch(/priority: must be a whole number from -1000 to 1000/);
    expect(loadError('tenants: [{ name: a, upstreamAuth: { password: x } }]')).toMatch(/tenants\[0\]: upstreamAuth is for a tenant's own upstreams: give upstreams too/);
    expect(loadError('tenants: [{ name: a, upstreams: ["nohost"] }]')).toMatch(/tenants\[0\].*upstreams/);
    expect(loadError('tenants: [{ name: a, upstreams: [] }]')).toMatch(/upstreams/);
    expect(loadError('tenants: [{ name: a, upstreams: ["h:1"], upstreamAuth: { username: u } }]')).toMatch(/upstreamAuth needs password or passwordEnv/);
    expect(loadError('tenants: [{ name: a, upstreams: ["h:1"], upstreamTls: { ca: /no/such/file.pem } }]')).toMatch(/tenants\[0\].*no\/such\/file\.pem/);
    expect(loadError('tenants: [{ name: a, upstreams: ["h:1"], mode: sharded }]')).toMatch(/mode/);
    expect(loadError('tenants: [{ name: a, keyPrefix: "{respool-fleet}" }]')).toMatch(/keyPrefix/); // the fleet's reserved keys cannot be a namespace
    expect(loadError('tenants: [{ name: a }]\nusers: [{ name: u, password: p, tenant: nosuch }]')).toMatch(/tenant "nosuch" is not one of tenants\[\] \(a\)/);
    expect(loadError('tenants: [{ name: a, keyPrefix: "app:" }, { name: b, keyPrefix: "app:x:" }]')).toMatch(/keyPrefix "app:x:" overlaps tenant "a"'s "app:"/);
    expect(loadError('tenants: [{ name: a }, { name: a }]')).toMatch(/tenant "a" is already defined in tenants\[0\]/);
    expect(loadError('tenants: [{ name: default }]')).toMatch(/the name "default" is the tenant of users in no tenant/);
    expect(loadError('tenants: [{ name: a, keyPrefix: "a:" }]\nusers: [{ name: u, password: p, tenant: a, keyPrefix: "u:" }]')).toMatch(/give keyPrefix on the user or on its tenant "a", not both/);
    expect(loadError('tenants: [{ name: "a b" }]')).toMatch(/tenants.*name/);
    expect(loadError('tenants: [{ name: a, keyPrefix: "{x}" }]')).toMatch(/keyPrefix/);
    expect(loadError('tenants: [{ name: a, limits: { opsPerSecond: 0 } }]')).toMatch(/opsPerSecond/);
    expect(loadError('tenants: [{ name: a, limits: { maxClients: 1.5 } }]')).toMatch(/maxClients/);
    expect(loadError('tenants: [{ name: a, limits: { bytesPerSecond: 0 } }]')).toMatch(/tenants\[0\]: limits.bytesPerSecond: must be a size from 1b to 1tb \(got 0\)/);
    expect(loadError('tenants: [{ name: a, limits: { bytesPerSecond: fast } }]')).toMatch(/bytesPerSecond: must be a size like 512mb/);
    expect(loadError('tenants: [{ name: a, limits: { opsPerSec: 10 } }]')).toMatch(/opsPerSec/);
  });
});

describe('TokenBucket', () => {
  it('lets its rate through over time, a burst at most, and counts a debt', () => {
    const bucket = new TokenBucket(100, 5, 0);
    let taken = 0;
    for (let t = 0; t <= 1000; t++) {
      while (bucket.available(t)) {
        bucket.take(1, t);
        taken++;
      }
    }
    expect(taken).toBeGreaterThanOrEqual(100);
    expect(taken).toBeLessThanOrEqual(106); // the rate over 1 s, plus the burst
    const bytes = new TokenBucket(1000, 50, 0);
    bytes.take(2050, 0); // a request far over the burst: 2 s of debt
    expect(bytes.available(1000)).toBe(false);
    expect(bytes.msUntilAvailable(1000)).toBeCloseTo(1000, 0);
    expect(bytes.available(2001)).toBe(true);
  });
});

describe('Tenant', () => {
  const client = (): TenantClient & { woken: number } => {
    const c = { closed: false, woken: 0, tenantReady: () => { c.woken++; } };
    return c;
  };

  it('holds its clients past opsPerSecond and wakes each once when the rate allows', () => {
    vi.useFakeTimers();
    try {
      const tenant = new Tenant({ name: 't', keyPrefix: null, upstream: null, limits: limits({ opsPerSecond: 1000 }) });
      const a = client();
      const b = client();
      let admitted = 0;
      holdClock(); // one moment: no token comes in meanwhile
      try {
        while (tenant.mayAdmit(a)) {
          tenant.admitted(10);
          admitted++;
        }
        expect(admitted).toBeLessThanOrEqual(51); // the 50 ms burst
        expect(tenant.mayAdmit(b)).toBe(false);
        expect(tenant.mayAdmit(a)).toBe(false); // held once
      } finally {
        releaseClock();
      }
      expect(tenant.snapshot()).toMatchObject({ heldClients: 2, held: { ops: 2, bytes: 0, inflight: 0, share: 0 }, requests: admitted });
      vi.advanceTimersByTime(5);
      expect([a.woken, b.woken]).toEqual([1, 1]);
      expect(tenant.snapshot().heldClients).toBe(0);
    } finally {
      vi.useRealTimers();
    }
  });

  it('holds at maxInflight until a reply is written, and counts clients against maxClients', () => {
    vi.useFakeTimers();
    try {
      const tenant = new Tenant({ name: 't', keyPrefix: null, upstream: null, limits: limits({ maxInflight: 2, maxClients: 1 }) });
      const a = client();
      tenant.inflight.count = 2;
      expect(tenant.mayAdmit(a)).toBe(false);
      vi.advanceTimersByTime(100);
      expect(a.woken).toBe(0); // nothing but a written reply frees it
      tenant.inflight.count = 1;
      tenant.replyWritten(5);
      vi.advanceTimersByTime(2);
      expect(a.woken).toBe(1);
      expect(tenant.hasRoom()).toBe(true);
      moveClient(null, tenant, 0);
      expect(tenant.hasRoom()).toBe(false);
      moveClient(tenant, null, 0);
      expect(tenant.hasRoom()).toBe(true);
    } finally {
      vi.useRealTimers();
    }
  });

  it('takes its fair share while another tenant is busy, and all it wants while alone', async () => {
    const directory = new TenantDirectory([
      { name: 'flood', keyPrefix: null, upstream: null, limits: limits() },
      { name: 'probe', keyPrefix: null, upstream: null, limits: limits() },
    ], []);
    const [flood, probe] = directory.list();
    const a = client();
    for (let i = 0; i < TURN_SHARE * 2; i++) {
      expect(flood!.mayAdmit(a)).toBe(true); // alone: no share applies
      flood!.admitted(10);
    }
    probe!.inflight.count = 1; // another tenant has a request under way
    expect(flood!.mayAdmit(a)).toBe(false);
    expect(probe!.mayAdmit(client())).toBe(true);
    expect(flood!.snapshot().held.share).toBe(1);
    await new Promise((r) => setImmediate(r)); // the next turn: its share starts again
    expect(a.woken).toBe(1);
    expect(flood!.mayAdmit(a)).toBe(true);
    flood!.inflight.count = INFLIGHT_SHARE; // owed its share of replies
    expect(flood!.mayAdmit(a)).toBe(false);
    probe!.inflight.count = 0;
    expect(flood!.mayAdmit(a)).toBe(true); // alone again
  });
});
