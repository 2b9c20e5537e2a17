// respool on a Unix domain socket (issue 23, sidecars): `--listen unix:PATH` instead of TCP, or
// `unixSocket` beside it; the socket's mode as configured, a stale socket replaced at start, a
// live one refused, the file removed on shutdown; real clients (valkey-cli -s, iovalkey `path`).
import { execFile, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { Valkey } from 'iovalkey';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startStandalone, VALKEY_CLI, type ValkeyNode } from '../harness/valkey-processes.js';
import { RESPOOL_BIN as BIN, runRespool } from '../helpers/respool-cli.js';
import { startTestProxy } from '../helpers/proxy.js';
import { waitFor } from '../helpers/wait.js';

const run = promisify(execFile);

describe('Unix domain sockets', () => {
  let node: ValkeyNode;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'respool-unix-'));

  beforeAll(async () => {
    node = await startStandalone();
  });
  afterAll(async () => {
    await node?.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('--listen unix:PATH: served over the socket with the configured mode, replaces a stale socket, removes it on SIGTERM', async () => {
    const sock = path.join(dir, 'a.sock');
    // A stale socket: a listener killed without removing its file.
    const stale = spawn('node', ['-e', "require('net').createServer().listen(process.argv[1], () => console.log('up'))", sock], { stdio: ['ignore', 'pipe', 'ignore'] });
    await new Promise<void>((r) => stale.stdout!.once('data', () => r()));
    stale.kill('SIGKILL');
    await new Promise((r) => stale.once('exit', r));
    expect(fs.lstatSync(sock).isSocket()).toBe(true);
    const child = spawn('node', [BIN, '--listen', `unix:${sock}`, '--unix-socket-mode', '600', '--upstream', `127.0.0.1:${node.port}`, '--log-level', 'warn'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
    try {
      await waitFor(async () => {
        try {
          return (await run(VALKEY_CLI, ['-s', sock, 'PING'])).stdout.trim() === 'PONG';
        } catch {
          return false;
        }
      }, `respool on ${sock}`, 15_000);
      expect(fs.statSync(sock).mode & 0o777).toBe(0o600);
      expect((await run(VALKEY_CLI, ['-s', sock, 'SET', 'unix:k', 'v'])).stdout.trim()).toBe('OK');
      const client = new Valkey({ path: sock, maxRetriesPerRequest: 0 });
      expect(await client.get('unix:k')).toBe('v');
      const list = (await client.client('LIST')) as string;
      expect(list).toContain(`addr=${sock}:0 laddr=${sock}:0`);
      const info = (await client.info('server')) as string;
      expect(info).toContain(`listener0:name=unix,bind=${sock}`);
      expect(info).not.toContain('name=tcp');
      await client.quit();
      // A second respool on the same path is refused: a live server answers there.
      const second = await runRespool(['--listen', `unix:${sock}`, '--upstream', `127.0.0.1:${node.port}`]);
      expect(second.code).not.toBe(0);
      expect(`${second.stderr}${second.stdout}`).toContain(`unixSocket ${sock} is in use`);
      const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
      expect(fs.existsSync(sock)).toBe(false);
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
    }
    expect(output).not.toMatch(/"level":"error"/);
  }, 30_000);

  it('unixSocket beside TCP; a path that is not a socket is left alone and refused', async () => {
    const sock = path.join(dir, 'b.sock');
    const proxy = await startTestProxy([node], { unixSocket: sock } as never);
    try {
      const overUnix = new Valkey({ path: sock, maxRetriesPerRequest: 0 });
      const overTcp = new Valkey({ host: '127.0.0.1', port: proxy.address.port, maxRetriesPerRequest: 0 });
      expect(await overUnix.set('both:k', 'u')).toBe('OK');
      expect(await overTcp.get('both:k')).toBe('u');
      await overUnix.quit();
      await overTcp.quit();
    } finally {
      await proxy.close();
    }
    expect(fs.existsSync(sock)).toBe(false);
    const file = path.join(dir, 'plain-file');
    fs.writeFileSync(file, 'not a socket');
    const refused = await runRespool(['--listen', `unix:${file}`, '--upstream', `127.0.0.1:${node.port}`]);
    expect(refused.code).not.toBe(0);
    expect(`${refused.stderr}${refused.stdout}`).toContain('exists and is not a socket');
    expect(fs.readFileSync(file, 'utf8')).toBe('not a socket');
    expect((await runRespool(['--listen', 'unix:', '--upstream', 'a:1'])).stderr).toMatch(/--listen: unix: needs a socket path/);
  }, 30_000);
});
