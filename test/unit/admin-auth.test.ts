import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import { afterAll, afterEach, describe, expect, it } from 'vitest';

import { bearerMatches, isLoopback, startAdminServer, type AdminServer } from '../../src/admin/admin-server.js';
import { Metrics } from '../../src/metrics/metrics.js';
import { ConfigError, parseCommandLine, type RespoolConfig } from '../../src/config/load-config.js';

const TOKEN = 'a-very-secret-admin-token-0123456789';
const servers: AdminServer[] = [];
const dir = mkdtempSync(join(tmpdir(), 'respool-admin-auth-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

async function start(token: string | null): Promise<string> {
  let current = token;
  const admin = await startAdminServer({ host: '127.0.0.1', port: 0 }, new Metrics(), {
    readiness: () => ({ ready: true }),
    topology: () => ({}),
  }, { token: () => current });
  admin.registerRoute('POST', '/thing', () => ({ status: 200, body: { done: true } }));
  admin.registerRoute('DELETE', '/thing', () => ({ status: 200, body: { deleted: true } }));
  admin.registerRoute('GET', '/thing', () => ({ status: 200, body: { read: true } }));
  // lets a test rotate the token as a reload would
  admin.registerRoute('GET', '/rotate', (req) => {
    current = req.url.searchParams.get('to');
    return { status: 204 };
  });
  servers.push(admin);
  return `http://127.0.0.1:${admin.address.port}`;
}

async function call(url: string, method: 'GET' | 'POST' | 'DELETE', token?: string) {
  const res = await request(url, { method, headers: token === undefined ? {} : { authorization: `Bearer ${token}` } });
  const text = await res.body.text();
  return { status: res.statusCode, body: text === '' ? null : (JSON.parse(text) as Record<string, unknown>), headers: res.headers };
}

describe('admin mutations need a bearer token', () => {
  it('with no token configured: POST/DELETE refused with 403 saying how to configure one; GET open', async () => {
    const base = await start(null);
    for (const method of ['POST', 'DELETE'] as const) {
      const r = await call(`${base}/thing`, method, TOKEN);
      expect(r.status).toBe(403);
      expect(String(r.body!['error'])).toMatch(/admin\.token.*admin\.tokenFile.*--admin-token-file.*RESPOOL_ADMIN_TOKEN/);
    }
    expect((await call(`${base}/thing`, 'GET')).status).toBe(200);
    for (const path of ['/metrics', '/healthz', '/readyz', '/topology']) {
      const res = await request(`${base}${path}`);
      await res.body.text();
      expect(res.statusCode, path).toBe(200);
    }
  });

  it('with a token: missing or wrong → 401, right → the route runs; GET needs none', async () => {
    const base = await start(TOKEN);
    const missing = await call(`${base}/thing`, 'POST');
    expect(missing.status).toBe(401);
    expect(missing.headers['www-authenticate']).toMatch(/^Bearer/);
    expect((await call(`${base}/thing`, 'POST', `${TOKEN}x`)).status).toBe(401);
    expect((await call(`${base}/thing`, 'POST', TOKEN.slice(0, -1))).status).toBe(401);
    expect((await call(`${base}/thing`, 'DELETE', 'short')).status).toBe(401);
    const ok = await call(`${base}/thing`, 'POST', TOKEN);
    expect(ok).toMatchObject({ status: 200, body: { done: true } });
    expect((await call(`${base}/thing`, 'DELETE', TOKEN)).status).toBe(200);
    expect((await call(`${base}/thing`, 'GET')).status).toBe(200);
    // Unknown paths and wrong methods answer as before (404 / 405), whatever the token.
    expect((await call(`${base}/nope`, 'POST')).status).toBe(404);
    expect((await call(`${base}/metrics`, 'POST')).status).toBe(405);
  });

  it('reads the token at each request (a reload rotates it)', async () => {
    const base = await start(TOKEN);
    await call(`${base}/rotate?to=another-token-of-enough-length`, 'GET');
    expect((await call(`${base}/thing`, 'POST', TOKEN)).status).toBe(401);
    expect((await call(`${base}/thing`, 'POST', 'another-token-of-enough-length')).status).toBe(200);
  });

  it('compares in constant time on digests; parses only "Bearer <token>"', () => {
    expect(bearerMatches(`Bearer ${TOKEN}`, TOKEN)).toBe(true);
    expect(bearerMatches(`bearer   ${TOKEN}`, TOKEN)).toBe(true);
    expect(bearerMatches(TOKEN, TOKEN)).toBe(false);
    expect(bearerMatches(`Basic ${TOKEN}`, TOKEN)).toBe(false);
    expect(bearerMatches(undefined, TOKEN)).toBe(false);
    expect(bearerMatches('Bearer ', '')).toBe(false);
    expect(isLoopback('127.0.0.1')).toBe(true);
    expect(isLoopback('::1')).toBe(true);
    expect(isLoopback('0.0.0.0')).toBe(false);
    expect(isLoopback('10.0.0.1')).toBe(false);
  });
});

describe('admin token and address settings', () => {
  const UP = ['--upstream', '127.0.0.1:7000'];
  const run = (argv: string[], env: NodeJS.ProcessEnv = {}): RespoolConfig => {
    const r = parseCommandLine(argv, env);
    if (r.kind !== 'run') throw new Error('expected run');
    return r.config;
  };
  const file = (name: string, text: string) => {
    const p = join(dir, name);
    writeFileSync(p, text);
    return p;
  };

  it('a bare --admin port listens on loopback; no token by default', () => {
    const c = run([...UP, '--admin', '9121']);
    expect(c.admin).toEqual({ host: '127.0.0.1', port: 9121 });
    expect(c.adminToken).toBeNull();
    expect(run([...UP, '--admin', '0.0.0.0:9121']).admin).toEqual({ host: '0.0.0.0', port: 9121 });
  });

  it('token from the file (token or tokenFile), the environment, or --admin-token-file; flags > env > file', () => {
    const tokenFile = file('token.txt', 'token-from-a-file-0123456789\n');
    const direct = file('a.yaml', `admin: { address: "127.0.0.1:9200", token: "token-in-the-config-file-xyz" }\n`);
    expect(run([...UP, '--config', direct])).toMatchObject({ admin: { host: '127.0.0.1', port: 9200 }, adminToken: 'token-in-the-config-file-xyz' });
    const viaFile = file('b.yaml', `admin: { address: "9300", tokenFile: ${JSON.stringify(tokenFile)} }\n`);
    expect(run([...UP, '--config', viaFile])).toMatchObject({ admin: { host: '127.0.0.1', port: 9300 }, adminToken: 'token-from-a-file-0123456789' });
    const env = { RESPOOL_ADMIN_TOKEN: 'token-from-the-environment' };
    expect(run([...UP, '--config', direct], env).adminToken).toBe('token-from-the-environment');
    expect(run([...UP, '--config', direct, '--admin-token-file', tokenFile], env).adminToken).toBe('token-from-a-file-0123456789');
    expect(run([...UP, '--admin', '127.0.0.1:0'], env).adminToken).toBe('token-from-the-environment');
  });

  it('bad token settings are config errors naming the field', () => {
    const errorOf = (argv: string[]) => {
      try {
        parseCommandLine(argv, {});
      } catch (e) {
        expect(e).toBeInstanceOf(ConfigError);
        return (e as Error).message;
      }
      throw new Error('expected a ConfigError');
    };
    expect(errorOf([...UP, '--admin-token-file', join(dir, 'missing')])).toMatch(/--admin-token-file: cannot read .*no such file/);
    expect(errorOf([...UP, '--admin-token-file', file('short.txt', 'abc\n')])).toMatch(/at least 16 characters/);
    expect(errorOf([...UP, '--config', file('c.yaml', 'admin: { address: "127.0.0.1:1", token: "short" }\n')])).toMatch(/admin\.token: must be a string of at least 16 characters/);
    expect(errorOf([...UP, '--config', file('d.yaml', 'admin: { address: "127.0.0.1:1", tokne: "x" }\n')])).toMatch(/unknown field "tokne" in admin/);
  });
});

describe('the admin read token (admin.readToken)', () => {
  const READ = 'a-read-only-token-0123456789';
  it('guards every GET but /metrics, /healthz, /readyz and the status page files; the admin token reads too', async () => {
    const admin = await startAdminServer({ host: '127.0.0.1', port: 0 }, new Metrics(), {
      readiness: () => ({ ready: true }),
      topology: () => ({ nodes: [] }),
    }, { token: () => TOKEN, readToken: () => READ });
    servers.push(admin);
    admin.registerRoute('GET', '/', () => ({ status: 200, contentType: 'text/html', body: '<html></html>' }));
    const base = `http://127.0.0.1:${admin.address.port}`;
    for (const open of ['/metrics', '/healthz', '/readyz', '/']) expect((await request(`${base}${open}`)).statusCode, open).toBe(200);
    const plain = await request(`${base}/topology`);
    expect(plain.statusCode).toBe(401);
    expect(await plain.body.text()).toContain('admin read token');
    expect((await call(`${base}/topology`, 'GET', 'wrong-token-0123456789')).status).toBe(401);
    expect((await call(`${base}/topology`, 'GET', READ)).status).toBe(200);
    expect((await call(`${base}/topology`, 'GET', TOKEN)).status).toBe(200);
    // The read token does not allow mutations.
    admin.registerRoute('POST', '/thing', () => ({ status: 200, body: {} }));
    expect((await call(`${base}/thing`, 'POST', READ)).status).toBe(401);
  });
});
