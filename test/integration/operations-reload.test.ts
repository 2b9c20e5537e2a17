import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startStandalone, type ValkeyNode } from '../harness/valkey-processes.js';
import { RawConnection } from '../helpers/raw-resp.js';
import { RESPOOL_BIN as BIN } from '../helpers/respool-cli.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A spawned `respool` whose stderr JSON lines are collected. */
class Spawned {
  readonly lines: Array<Record<string, unknown>> = [];
  private buffer = '';
  constructor(readonly child: ChildProcess) {
    child.stderr!.on('data', (chunk: Buffer) => {
      this.buffer += chunk.toString();
      let nl;
      while ((nl = this.buffer.indexOf('\n')) >= 0) {
        const line = this.buffer.slice(0, nl);
        this.buffer = this.buffer.slice(nl + 1);
        try {
          this.lines.push(JSON.parse(line) as Record<string, unknown>);
        } catch {
          /* not JSON */
        }
      }
    });
  }

  async line(match: (l: Record<string, unknown>) => boolean, after = 0, timeoutMs = 15_000): Promise<Record<string, unknown>> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = this.lines.slice(after).find(match);
      if (found) return found;
      if (Date.now() > deadline) throw new Error(`no matching log line; got:\n${this.lines.map((l) => JSON.stringify(l)).join('\n')}`);
      await sleep(20);
    }
  }
}

describe('SIGHUP reload (respool --config file)', () => {
  let server: ValkeyNode;
  let proc: Spawned;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'respool-reload-'));
  const file = path.join(dir, 'respool.yaml');
  const write = (body: string) => fs.writeFileSync(file, `upstreams: ["127.0.0.1:${server.port}"]\n${body}`);

  beforeAll(async () => {
    server = await startStandalone();
  });
  afterAll(async () => {
    if (proc && proc.child.exitCode === null) {
      const exited = new Promise((r) => proc.child.once('exit', r));
      proc.child.kill('SIGTERM');
      await exited;
    }
    await server?.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('applies good changes without dropping clients, reports restart-only ones, rejects a bad file', async () => {
    write(`listen: "127.0.0.1:0"\nadmin: "127.0.0.1:0"\ntimeouts: { commandMs: 5s }\nlimits: { maxPendingPerClient: 10000 }\nlogLevel: info\n`);
    proc = new Spawned(spawn('node', [BIN, '--config', file], { stdio: ['ignore', 'pipe', 'pipe'] }));
    const listening = await proc.line((l) => l['msg'] === 'respool listening');
    const port = (listening['listen'] as { port: number }).port;
    const admin = `http://127.0.0.1:${(listening['admin'] as { port: number }).port}`;
    const config = async () => (await (await request(`${admin}/config`)).body.json()) as Record<string, Record<string, unknown>>;

    const client = await RawConnection.connect(port);
    expect(await client.call('SET', 'reload:k', 'v1')).toBe('+OK\r\n');
    expect((await config())['timeouts']!['commandMs']).toBe(5000);

    // A good file: timeouts, a limit, log level, read strategy change; listen needs a restart.
    write(`listen: "127.0.0.1:1"\nadmin: "127.0.0.1:0"\ntimeouts: { commandMs: 7s }\nlimits: { maxPendingPerClient: 500 }\nlogLevel: debug\nreads: { strategy: preferReplica }\n`);
    let mark = proc.lines.length;
    proc.child.kill('SIGHUP');
    const applied = await proc.line((l) => l['event'] === 'reload_applied', mark);
    expect(applied['applied']).toEqual(expect.arrayContaining(['timeouts.commandMs', 'limits.maxPendingPerClient', 'logLevel', 'reads.strategy']));
    expect(applied['needsRestart']).toEqual(['listen']);
    expect(String(applied['msg'])).toMatch(/needs a restart.*listen/);
    const running = await config();
    expect(running['timeouts']!['commandMs']).toBe(7000);
    expect(running['limits']!['maxPendingPerClient']).toBe(500);
    expect(running['reads']!['strategy']).toBe('preferReplica');
    expect(running['logLevel']).toBe('debug');
    expect(running['listen']).toEqual({ host: '127.0.0.1', port: 0 }); // kept until a restart
    // the same client connection, still served
    expect(await client.call('GET', 'reload:k')).toBe('$2\r\nv1\r\n');

    // Users: from now on new clients must AUTH; the connected one stays connected as the default
    // user, which is now off and allowed nothing (a reload changes users in place, as ACL LOAD).
    write(`listen: "127.0.0.1:0"\nadmin: "127.0.0.1:0"\ntimeouts: { commandMs: 7s }\nlimits: { maxPendingPerClient: 500 }\nlogLevel: debug\nreads: { strategy: preferReplica }\nusers: [{ name: app, password: reload-secret }]\n`);
    mark = proc.lines.length;
    proc.child.kill('SIGHUP');
    expect((await proc.line((l) => l['event'] === 'reload_applied', mark))['applied']).toEqual(['users']);
    const fresh = await RawConnection.connect(port);
    expect(await fresh.call('GET', 'reload:k')).toMatch(/^-NOAUTH/);
    expect(await fresh.call('AUTH', 'app', 'reload-secret')).toBe('+OK\r\n');
    expect(await fresh.call('GET', 'reload:k')).toBe('$2\r\nv1\r\n');
    fresh.close();
    expect(await client.call('GET', 'reload:k')).toBe("-NOPERM User default has no permissions to run the 'get' command\r\n");

    // A bad file: rejected with the start-up messages; the running config stays whole.
    write(`timeouts: { commandMs: 1s }\nconnectionsPerNode: 0\nlimts: {}\n`);
    mark = proc.lines.length;
    proc.child.kill('SIGHUP');
    const rejected = await proc.line((l) => l['event'] === 'reload_rejected', mark);
    expect(rejected['level']).toBe('error');
    const problems = (rejected['problems'] as string[]).join('\n');
    expect(problems).toMatch(/connectionsPerNode: must be an integer from 1 to 64 \(got 0\)/);
    expect(problems).toMatch(/unknown field "limts" at top level \(did you mean "limits"\?\)/);
    expect((await config())['timeouts']!['commandMs']).toBe(7000);
    expect(await (await request(`${admin}/metrics`)).body.text()).toMatch(/^respool_config_last_reload_successful 0$/m);
    expect(proc.child.exitCode).toBeNull();
    expect(await client.call('AUTH', 'app', 'reload-secret')).toBe('+OK\r\n');
    expect(await client.call('SET', 'reload:k', 'v2')).toBe('+OK\r\n');
    const second = await RawConnection.connect(port);
    expect(await second.call('GET', 'reload:k')).toMatch(/^-NOAUTH/); // the users of the last good config still apply
    expect(await second.call('AUTH', 'app', 'reload-secret')).toBe('+OK\r\n');
    expect(await second.call('GET', 'reload:k')).toBe('$2\r\nv2\r\n');
    client.close();
    second.close();
  }, 60_000);

  it('runs from the environment alone (no config file); a flag wins over the environment', async () => {
    const env = {
      ...process.env,
      RESPOOL_UPSTREAMS: `127.0.0.1:${server.port}`,
      RESPOOL_LISTEN: '127.0.0.1:0',
      RESPOOL_ADMIN: '127.0.0.1:0',
      RESPOOL_TIMEOUTS_COMMAND_MS: '3s',
      RESPOOL_CONNECTIONS_PER_NODE: '3',
      RESPOOL_ADMIN_TOKEN: 'env-admin-token-0123456789',
    };
    const child = new Spawned(spawn('node', [BIN, '--connections-per-node', '4'], { stdio: ['ignore', 'pipe', 'pipe'], env }));
    try {
      const listening = await child.line((l) => l['msg'] === 'respool listening');
      const admin = `http://127.0.0.1:${(listening['admin'] as { port: number }).port}`;
      const running = (await (await request(`${admin}/config`)).body.json()) as Record<string, unknown>;
      expect((running['timeouts'] as Record<string, unknown>)['commandMs']).toBe(3000);
      expect(running['connectionsPerNode']).toBe(4);
      expect(running['adminToken']).toBe('<set>'); // redacted
      const conn = await RawConnection.connect((listening['listen'] as { port: number }).port);
      expect(await conn.call('PING')).toBe('+PONG\r\n');
      conn.close();
      // the token from the environment opens admin mutations
      const denied = await request(`${admin}/hotkeys/split`, { method: 'POST', body: '{"key":"k"}' });
      await denied.body.text();
      expect(denied.statusCode).toBe(401);
    } finally {
      const exited = new Promise((r) => child.child.once('exit', r));
      child.child.kill('SIGTERM');
      await exited;
    }
  }, 30_000);
});
