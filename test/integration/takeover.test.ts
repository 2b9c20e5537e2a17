/**
 * Takeover (issue 34, src/workers/takeover.ts): `--workers 2`, SIGUSR2 to the supervisor three
 * times in a row while iovalkey clients run verified commands over TCP, TLS and the Unix socket,
 * and redis-py with its defaults (no retry) over TCP: the plain TCP and Unix connections are
 * handed to the new workers (session/session-handover.ts) and never close; the TLS one closes
 * after a reply and iovalkey reconnects.
 * Every worker is replaced each time (new pids serve, the old ones exit), no command fails,
 * every acknowledged write is read back, and the upstream connections stay below twice their
 * number before the takeovers (one worker more than two, for one drain at a time).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Valkey } from 'iovalkey';
import { freePort, startStandalone, type ValkeyNode } from '../harness/valkey-processes.js';
import { RawConnection } from '../helpers/raw-resp.js';
import { RESPOOL_BIN as BIN } from '../helpers/respool-cli.js';
import { makeTestCerts, type TestCerts } from '../harness/valkey-tls.js';
import { sleep, until } from '../helpers/wait.js';


/** The pids of the workers serving new connections (respool's INFO server process_id), over `tries` connections. */
async function servingPids(port: number, tries = 8): Promise<Set<number>> {
  const pids = new Set<number>();
  for (let i = 0; i < tries; i++) {
    const c = await RawConnection.connect(port);
    try {
      pids.add(Number(/process_id:(\d+)/.exec(await c.call('INFO', 'server'))![1]));
    } finally {
      c.close();
    }
  }
  return pids;
}

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe('takeover: SIGUSR2 replaces every worker without a failed command (--workers 2)', () => {
  let server: ValkeyNode;
  let child: ChildProcess;
  let port: number;
  const socketPath = path.join(os.tmpdir(), `respool-takeover-${process.pid}.sock`);
  const configPath = path.join(os.tmpdir(), `respool-takeover-${process.pid}.yaml`);
  let stderr = '';
  let certs: TestCerts;
  let tlsPort: number;

  beforeAll(async () => {
    server = await startStandalone();
    port = await freePort();
    tlsPort = await freePort();
    certs = makeTestCerts();
    // The Unix socket beside TCP is a config file's (unixSocket:).
    fs.writeFileSync(configPath, `unixSocket: ${socketPath}\n`);
    child = spawn('node', [BIN, '--config', configPath, '--workers', '2', '--listen', `127.0.0.1:${port}`, '--listen-tls', `127.0.0.1:${tlsPort}`, '--tls-cert', certs.serverCert, '--tls-key', certs.serverKey, '--upstream', `${server.host}:${server.port}`, '--mode', 'standalone', '--log-level', 'warn'], { stdio: ['ignore', 'ignore', 'pipe'] });
    child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    await until('two workers serving', async () => ((await servingPids(port)).size === 2 ? true : undefined), 30_000).catch((err: Error) => {
      throw new Error(`${err.message}; respool said: ${stderr.slice(-500)}`);
    });
  }, 60_000);

  afterAll(async () => {
    if (child?.exitCode === null) {
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await exited;
    }
    await server?.stop();
    fs.rmSync(configPath, { force: true });
    certs?.remove();
  });

  it('three takeovers in a row (TCP, TLS, Unix socket): new pids, old ones gone, 0 failed commands, every write read back, upstream links bounded', async () => {
    const upstreamClients = async () => Number(/connected_clients:(\d+)/.exec(String(await server.call('INFO', 'clients')))![1]);
    const baseline = await upstreamClients();
    let most = baseline;
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        most = Math.max(most, await upstreamClients());
        await sleep(25);
      }
    })();

    const clients = [
      new Valkey({ port, host: '127.0.0.1' }),
      new Valkey({ port, host: '127.0.0.1' }),
      new Valkey({ path: socketPath }),
      new Valkey({ path: socketPath }),
      new Valkey({ port: tlsPort, host: '127.0.0.1', tls: { ca: fs.readFileSync(certs.ca), servername: 'localhost' } }),
    ];
    // A connection a draining worker closes shows as an error event (EPIPE, ECONNRESET) before
    // iovalkey reconnects and sends again what was not answered: counted, not failed commands.
    let reconnects = 0;
    for (const c of clients) c.on('error', () => reconnects++);
    let failed = 0;
    const failures: string[] = [];
    let increments = 0;
    const perClient = clients.map(() => 0);
    // Each GET's start and duration, and the takeovers' windows (SIGUSR2 → old workers gone): the pause a request sees.
    const gets: Array<[number, number]> = [];
    const windows: Array<[number, number]> = [];
    const written = new Map<string, string>();
    let running = true;
    const loops = clients.map(async (c, n) => {
      for (let i = 0; running; i++) {
        const key = `tk:${n}:${i}`;
        const value = `v${n}-${i}`;
        try {
          expect(await c.set(key, value)).toBe('OK');
          written.set(key, value);
          const asked = performance.now();
          expect(await c.get(key)).toBe(value);
          gets.push([asked, performance.now() - asked]);
          await c.incr('tk:counter');
          increments++;
          perClient[n]!++;
        } catch (err) {
          failed++;
          if (failures.length < 5) failures.push(`${key}: ${(err as Error).message}`);
        }
      }
    });

    // redis-py with its defaults (a pool, no retry), in a process of its own, until its stdin closes.
    const py = spawn('/usr/bin/python3', ['test/clients/redis-py-loop.py', String(port), 'tkpy'], { stdio: ['pipe', 'pipe', 'pipe'] });
    let pyOut = '';
    py.stdout!.on('data', (d: Buffer) => (pyOut += d.toString()));
    py.stderr!.on('data', (d: Buffer) => (pyOut += d.toString()));
    const pyDone = new Promise<void>((resolve) => py.once('exit', () => resolve()));
    await sleep(500);
    try {
      for (let round = 0; round < 3; round++) {
        const before = await servingPids(port);
        expect(before.size).toBe(2);
        const windowStart = performance.now();
        child.kill('SIGUSR2');
        const after = await until(`takeover ${round + 1}: two new workers serving`, async () => {
          const now = await servingPids(port);
          return now.size === 2 && [...now].every((pid) => !before.has(pid)) ? now : undefined;
        }, 30_000);
        await until(`takeover ${round + 1}: the old workers gone`, async () => ([...before].every((pid) => !alive(pid)) ? true : undefined), 30_000);
        windows.push([windowStart, performance.now()]);
        expect([...after].every(alive)).toBe(true);
        await sleep(300);
      }
    } finally {
      running = false;
      py.stdin!.end();
      await Promise.all(loops);
      await pyDone;
      sampling = false;
      await sampler;
    }

    const check = new Valkey({ port, host: '127.0.0.1' });
    try {
      let lost = 0;
      for (const [key, value] of written) if ((await check.get(key)) !== value) lost++;
      const counter = Number(await check.get('tk:counter'));
      const pyResult = JSON.parse(pyOut.trim().split('\n').pop()!) as { written: Record<string, string>; increments: number; failures: string[]; failed: number };
      for (const [key, value] of Object.entries(pyResult.written)) if ((await check.get(key)) !== value) lost++;
      console.log(`redis-py: ${Object.keys(pyResult.written).length} writes, ${pyResult.failed} failed commands ${JSON.stringify(pyResult.failures.slice(0, 3))}`);
      // redis-py resends nothing by itself: its connection is handed to the new worker, never closed.
      expect(pyResult.failures).toEqual([]);
      expect(Number(await check.get('tkpy:counter'))).toBe(pyResult.increments);
      expect(Object.keys(pyResult.written).length).toBeGreaterThan(100);
      const p99 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length * 0.99)] ?? 0;
      const during = gets.filter(([t]) => windows.some(([a, b]) => t >= a && t <= b)).map(([, ms]) => ms);
      const outside = gets.filter(([t]) => !windows.some(([a, b]) => t >= a && t <= b)).map(([, ms]) => ms);
      console.log(`GET p99 during the takeovers ${p99(during).toFixed(2)} ms (${during.length} GETs, max ${Math.max(...during).toFixed(1)}), outside them ${p99(outside).toFixed(2)} ms (${outside.length})`);
      console.log(`3 takeovers: ${written.size} writes, ${increments} INCRs, ${failed} failed commands, ${reconnects} connection errors iovalkey recovered from, upstream connections ${baseline} before, at most ${most} during`);
      expect(failures).toEqual([]);
      expect(failed).toBe(0);
      expect(lost).toBe(0);
      expect(counter).toBe(increments);
      expect(written.size).toBeGreaterThan(100);
      expect(perClient.every((count) => count > 10)).toBe(true); // TCP, Unix socket and TLS clients all ran
      expect(most).toBeLessThan(2 * baseline);
    } finally {
      check.disconnect();
      for (const c of clients) c.disconnect();
    }
  }, 120_000);
});
